import { type ChildProcess, fork } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../lib/config/config.ts';
import type { Listening } from '../lib/http/serve.ts';
import { startGateway } from '../mcp-gateway/server.ts';
import { freshDatabase, startTestPostgres } from '../tests/helpers/postgres.ts';
import { SPLIT_TOOLSETS } from '../tests/helpers/stack.ts';
import { startToolServer } from '../tool-server/server.ts';

// Gateway replicas on PostgreSQL (bench/run.ts figure 12): how long an operator's DISABLE on one replica takes
// to be refused by another (each replica keeps the disabled set in memory and drops it on a notification),
// and what the shared store costs a tool call: the p50 of one read_text_file call through a gateway on SQLite
// (the embedded default) and through a replica on PostgreSQL, alternating, in one run. Figure 17: that a replica
// never waits on its database with its event loop — a third replica, in a process of its own
// (bench/gateway-probe.ts): while a plain connection holds one session's row locked (up to 5 s) and the
// replica has a request of that session waiting for it, how long its /health and another session's tool call
// take; then its event loop's delay (monitorEventLoopDelay p99) under concurrent calls and toggles.

export interface ReplicasRun {
  /** Milliseconds from the DISABLE's answer on one replica to the other listing the toolset disabled. */
  disableMs: { p50: number; p95: number; max: number; rounds: number };
  /** p50 of a tool call (ms): through a gateway on SQLite, and through a replica on PostgreSQL. */
  callMs: { sqlite: number; postgres: number; calls: number };
  /**
   * Figure 17: while a plain connection holds a session's row, the replica's /health and a call of another
   * session (ms, p50 and slowest of `samples` each), and how long the request of the locked session waited.
   */
  lock?: {
    healthMs: { p50: number; max: number };
    otherCallMs: { p50: number; max: number };
    samples: number;
    lockedWaitedMs: number;
  };
  /** Figure 17: the replica's event-loop delay (ms) under `clients` concurrent clients for `seconds`. */
  loop?: { p50: number; p99: number; max: number; clients: number; seconds: number; requests: number };
  skipped?: string;
}

const TOKEN = 'bench-replicas-token';

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

/** A replica in its own process (bench/gateway-probe.ts), and its event loop's delay on request. */
async function probeReplica(env: Record<string, string>) {
  const child: ChildProcess = fork(path.resolve('bench/gateway-probe.ts'), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const next = <T>() =>
    new Promise<T>((resolve, reject) => {
      child.once('message', (m) => resolve(m as T));
      child.once('exit', (code) => reject(new Error(`the probe replica exited (${code})`)));
    });
  const { url } = await next<{ url: string }>();
  return {
    url,
    async reset() {
      const answered = next<unknown>();
      child.send('reset');
      await answered;
    },
    async report() {
      const answered = next<{ p50: number; p99: number; max: number }>();
      child.send('report');
      return answered;
    },
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.send('stop');
      await exited;
    },
  };
}

export async function replicasRun(
  rounds = 30,
  calls = 400,
  loadSeconds = 4,
  clients = 16,
): Promise<ReplicasRun> {
  let server: Awaited<ReturnType<typeof startTestPostgres>>;
  try {
    server = await startTestPostgres();
  } catch (err) {
    return {
      disableMs: { p50: 0, p95: 0, max: 0, rounds: 0 },
      callMs: { sqlite: 0, postgres: 0, calls: 0 },
      skipped: (err as Error).message,
    };
  }
  process.env.TOOLSHIFT_TEST_POSTGRES_URL = server.url;
  const tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-bench-replicas-'));
  const running: Listening[] = [];
  try {
    const workspace = path.join(tmp, 'workspace');
    const toolsets = path.join(tmp, 'toolsets');
    await mkdir(workspace);
    await mkdir(toolsets);
    await writeFile(path.join(workspace, 'a.txt'), 'hello');
    for (const [name, body] of Object.entries(SPLIT_TOOLSETS))
      await writeFile(path.join(toolsets, name), body);
    const env = {
      HOST: '127.0.0.1',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      TOOLSETS_DIR: toolsets,
      FS_ROOTS: workspace,
      LOG_LEVEL: 'silent',
      GATEWAY_ADMIN_TOKEN: TOKEN,
      GATEWAY_AGENT_TOKEN: `${TOKEN}-agent`,
      GATEWAY_MCP_TOKEN: `${TOKEN}-mcp`,
      MAX_CALLS_PER_MINUTE: '1000000',
      MAX_ACTIVATIONS_PER_TASK: '1000000',
    };
    const tools = await startToolServer(loadConfig({ ...env, TOOLSHIFT_DATA_DIR: path.join(tmp, 'tools') }));
    running.push(tools);
    const gateway = async (name: string, databaseUrl?: string) => {
      const g = await startGateway(
        loadConfig({
          ...env,
          TOOL_SERVER_URL: tools.url,
          TOOLSHIFT_DATA_DIR: path.join(tmp, name),
          ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
        }),
        { backendWaitMs: 5000, announce: false },
      );
      running.push(g);
      return g;
    };
    const url = await freshDatabase('replicas');
    const a = await gateway('a', url);
    const b = await gateway('b', url);
    const embedded = await gateway('embedded');
    await new Promise((r) => setTimeout(r, 300));

    const request = async (on: Listening, method: string, route: string, body?: unknown) => {
      const res = await fetch(`${on.url}${route}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
      return (await res.json()) as Record<string, unknown>;
    };
    const enabledOn = async (on: Listening) => {
      const listed = await request(on, 'GET', '/mcp/admin/toolsets');
      return (listed.toolsets as { id: string; enabled: boolean }[]).find((t) => t.id === 'fs_read')?.enabled;
    };

    const disable: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const [from, to] = i % 2 === 0 ? [a, b] : [b, a];
      await request(from, 'POST', '/mcp/admin/toolsets', { action: 'DISABLE', toolset_ids: ['fs_read'] });
      const answered = performance.now();
      while ((await enabledOn(to)) !== false) {
        if (performance.now() - answered > 10_000) throw new Error('the other replica never saw the DISABLE');
      }
      disable.push(performance.now() - answered);
      await request(from, 'POST', '/mcp/admin/toolsets', { action: 'ENABLE', toolset_ids: ['fs_read'] });
      while ((await enabledOn(to)) !== true) await new Promise((r) => setTimeout(r, 1));
    }

    const timings: Record<'sqlite' | 'postgres', number[]> = { sqlite: [], postgres: [] };
    for (const on of [a, embedded])
      await request(on, 'POST', '/mcp/admin/toolsets', {
        action: 'ACTIVATE',
        session_id: 'bench',
        toolset_ids: ['fs_read'],
      });
    for (let i = 0; i < calls; i++) {
      for (const [kind, on] of (i % 2 === 0
        ? [
            ['sqlite', embedded],
            ['postgres', a],
          ]
        : [
            ['postgres', a],
            ['sqlite', embedded],
          ]) as ['sqlite' | 'postgres', Listening][]) {
        const started = performance.now();
        await request(on, 'POST', '/mcp/tools/read_text_file/call', {
          session_id: 'bench',
          arguments: { path: 'a.txt' },
        });
        timings[kind].push(performance.now() - started);
      }
    }
    const round = (x: number) => Math.round(x * 100) / 100;

    // Figure 17: a third replica in a process of its own.
    const probe = await probeReplica({
      ...env,
      TOOL_SERVER_URL: tools.url,
      TOOLSHIFT_DATA_DIR: path.join(tmp, 'probe'),
      DATABASE_URL: url,
    });
    let lock: ReplicasRun['lock'];
    let loop: ReplicasRun['loop'];
    try {
      const on = { url: probe.url } as Listening;
      const timed = async (work: () => Promise<unknown>) => {
        const started = performance.now();
        await work();
        return performance.now() - started;
      };
      for (const session of ['locked', 'other'])
        await request(on, 'POST', '/mcp/admin/toolsets', {
          action: 'ACTIVATE',
          session_id: session,
          toolset_ids: ['fs_read'],
        });
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      const health: number[] = [];
      const other: number[] = [];
      let waitedMs = 0;
      try {
        await holder.query('BEGIN');
        await holder.query("SELECT 1 FROM sessions WHERE id = 'locked' FOR UPDATE");
        const locked = timed(() =>
          request(on, 'POST', '/mcp/admin/toolsets', {
            action: 'ACTIVATE',
            session_id: 'locked',
            toolset_ids: ['fs_write'],
          }),
        );
        // The lock is held up to 5 s; the samples take well under that, then it goes.
        const deadline = performance.now() + 5000;
        for (let i = 0; i < 20 && performance.now() < deadline; i++) {
          health.push(await timed(() => request(on, 'GET', '/health')));
          other.push(
            await timed(() =>
              request(on, 'POST', '/mcp/tools/read_text_file/call', {
                session_id: 'other',
                arguments: { path: 'a.txt' },
              }),
            ),
          );
        }
        await holder.query('COMMIT');
        waitedMs = await locked;
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
      lock = {
        healthMs: { p50: round(quantile(health, 0.5)), max: round(Math.max(...health)) },
        otherCallMs: { p50: round(quantile(other, 0.5)), max: round(Math.max(...other)) },
        samples: health.length,
        lockedWaitedMs: round(waitedMs),
      };

      // Its event loop under load: concurrent clients, each in a session of its own, calling a tool and
      // every eighth request toggling a toolset (a transaction on the session's row) or listing its tools.
      for (let c = 0; c < clients; c++)
        await request(on, 'POST', '/mcp/admin/toolsets', {
          action: 'ACTIVATE',
          session_id: `load-${c}`,
          toolset_ids: ['fs_read'],
        });
      await probe.reset();
      const until = performance.now() + loadSeconds * 1000;
      let requests = 0;
      await Promise.all(
        Array.from({ length: clients }, async (_, c) => {
          const session = `load-${c}`;
          for (let i = 0; performance.now() < until; i++) {
            if (i % 8 === 3 || i % 8 === 7) {
              await request(on, 'POST', '/mcp/admin/toolsets', {
                action: i % 8 === 3 ? 'ACTIVATE' : 'DEACTIVATE',
                session_id: session,
                toolset_ids: ['fs_write'],
              });
            } else if (i % 8 === 5) {
              await request(on, 'GET', `/mcp/tools?session_id=${session}`);
            } else {
              await request(on, 'POST', '/mcp/tools/read_text_file/call', {
                session_id: session,
                arguments: { path: 'a.txt' },
              });
            }
            requests++;
          }
        }),
      );
      const delay = await probe.report();
      loop = { ...delay, clients, seconds: loadSeconds, requests };
    } finally {
      await probe.stop();
    }
    return {
      lock,
      loop,
      disableMs: {
        p50: round(quantile(disable, 0.5)),
        p95: round(quantile(disable, 0.95)),
        max: round(Math.max(...disable)),
        rounds,
      },
      callMs: {
        sqlite: round(quantile(timings.sqlite.slice(50), 0.5)),
        postgres: round(quantile(timings.postgres.slice(50), 0.5)),
        calls,
      },
    };
  } finally {
    for (const s of running.reverse()) await s.close().catch(() => undefined);
    await rm(tmp, { recursive: true, force: true });
    server.stop();
  }
}
