import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../lib/config.ts';
import type { Listening } from '../lib/serve.ts';
import { startGateway } from '../mcp-gateway/server.ts';
import { freshDatabase, startTestPostgres } from '../tests/helpers/postgres.ts';
import { SPLIT_TOOLSETS } from '../tests/helpers/stack.ts';
import { startToolServer } from '../tool-server/server.ts';

// Gateway replicas on PostgreSQL (bench/run.ts figure 12): how long an operator's DISABLE on one replica takes
// to be refused by another (each replica keeps the disabled set in memory and drops it on a notification),
// and what the shared store costs a tool call: the p50 of one read_text_file call through a gateway on SQLite
// (the embedded default) and through a replica on PostgreSQL, alternating, in one run.

export interface ReplicasRun {
  /** Milliseconds from the DISABLE's answer on one replica to the other listing the toolset disabled. */
  disableMs: { p50: number; p95: number; max: number; rounds: number };
  /** p50 of a tool call (ms): through a gateway on SQLite, and through a replica on PostgreSQL. */
  callMs: { sqlite: number; postgres: number; calls: number };
  skipped?: string;
}

const TOKEN = 'bench-replicas-token';

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

export async function replicasRun(rounds = 30, calls = 400): Promise<ReplicasRun> {
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
    return {
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
