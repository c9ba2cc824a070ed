import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { startMockModel } from '../../bench/mock-model.ts';
import { startTestPostgres, type TestPostgres } from './postgres.ts';
import { isAlive } from './processes.ts';

// The PostgreSQL layout of issue 32's chaos run, every service its own process: the agent API, two workers,
// two gateway replicas behind a round-robin balancer, a tool-server, all on a PostgreSQL cluster of the test's
// own (so it can be stopped and started), the model a scripted endpoint on loopback. Each task activates the
// file tools, reads a file a few times, then answers with its key.

const BIN = path.resolve('bin/toolshift.js');
/** Model calls take this long: tasks span the database's outage. */
const MODEL_LATENCY_MS = 700;
/** A task's reads before its answer. */
const READS = 6;

export interface Service {
  name: string;
  child: ChildProcess;
  pid: number;
  url: string;
  log: () => string;
}

export interface ChaosStack {
  pg: TestPostgres;
  api: Service;
  services: Service[];
  /** The balancer's URL in front of the gateways. */
  gatewayUrl: string;
  /** Processes that are no longer running. */
  dead(): Service[];
  close(): Promise<void>;
}

/** A port free on 127.0.0.1 now (for a service whose address must be known before it starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** A TCP balancer: each connection goes to the next target in turn. */
function balancer(targets: number[]): Promise<{ port: number; close: () => Promise<void> }> {
  let next = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((inbound) => {
    const port = targets[next++ % targets.length];
    const outbound = net.connect(port, '127.0.0.1');
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy();
            server.close(() => done());
          }),
      }),
    ),
  );
}

/** Starts `toolshift serve <what>` and resolves once it answers /health. */
async function serve(
  name: string,
  what: string,
  port: number,
  env: Record<string, string>,
): Promise<Service> {
  const child = spawn(process.execPath, [BIN, 'serve', what], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c;
  });
  child.stderr?.on('data', (c: Buffer) => {
    out += c;
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited at start: ${out}`);
    const up = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) throw new Error(`${name} did not start: ${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { name, child, pid: child.pid as number, url, log: () => out };
}

/** The stack on a PostgreSQL cluster of its own; `workerEnv` is added to each worker's environment. */
export async function startChaosStack(workerEnv: Record<string, string> = {}): Promise<ChaosStack> {
  const tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-chaos-'));
  const workspace = path.join(tmp, 'workspace');
  await mkdir(workspace);
  await writeFile(path.join(workspace, 'notes.txt'), 'the notes\n');
  const pg = await startTestPostgres();
  const model = await startMockModel({
    latencyMs: MODEL_LATENCY_MS,
    script: (key, turn) => {
      if (turn === 0)
        return {
          calls: [
            {
              id: 'call_activate',
              name: 'manage_toolsets',
              arguments: { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] },
            },
          ],
        };
      if (turn <= READS)
        return {
          calls: [
            {
              id: `call_read_${turn}`,
              name: 'read_text_file',
              arguments: { path: path.join(workspace, 'notes.txt') },
            },
          ],
        };
      return { answer: `done ${key}` };
    },
  });
  const base = {
    HOME: tmp,
    HOST: '127.0.0.1',
    TOOLSHIFT_AUTH: 'none',
    DATABASE_URL: pg.url,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test-key',
    FS_ROOTS: workspace,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
  };
  const services: Service[] = [];
  const toolPort = await freePort();
  services.push(
    await serve('tool-server', 'tool-server', toolPort, {
      ...base,
      TOOL_SERVER_PORT: String(toolPort),
      TOOLSHIFT_DATA_DIR: path.join(tmp, 'tools'),
    }),
  );
  const gatewayPorts = [await freePort(), await freePort()];
  for (const [i, port] of gatewayPorts.entries()) {
    services.push(
      await serve(`gateway-${i + 1}`, 'mcp-gateway', port, {
        ...base,
        GATEWAY_PORT: String(port),
        TOOL_SERVER_URL: `http://127.0.0.1:${toolPort}`,
        TOOLSHIFT_DATA_DIR: path.join(tmp, `gateway-${i + 1}`),
      }),
    );
  }
  const lb = await balancer(gatewayPorts);
  const gatewayUrl = `http://127.0.0.1:${lb.port}`;
  const agentEnv = { ...base, GATEWAY_URL: gatewayUrl };
  const apiPort = await freePort();
  const api = await serve('agent-api', 'agent-api', apiPort, {
    ...agentEnv,
    AGENT_PORT: String(apiPort),
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'api'),
  });
  services.push(api);
  for (const name of ['worker-1', 'worker-2']) {
    const port = await freePort();
    services.push(
      await serve(name, 'worker', port, {
        ...agentEnv,
        AGENT_PORT: String(port),
        MAX_CONCURRENT_TASKS: '50',
        TOOLSHIFT_DATA_DIR: path.join(tmp, name),
        ...workerEnv,
      }),
    );
  }
  return {
    pg,
    api,
    services,
    gatewayUrl,
    dead: () => services.filter((s) => !isAlive(s.pid)),
    async close() {
      for (const s of services) if (isAlive(s.pid)) s.child.kill('SIGKILL');
      await lb.close();
      await model.close();
      try {
        pg.stop();
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
    },
  };
}

/** Submits `n` tasks (not waiting for them); their ids. */
export async function submitTasks(api: Service, n: number, prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${api.url}/agent/execute_task`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ goal: `[bench ${prefix}-${i}] read the notes`, wait: false }),
    });
    if (res.status !== 202) throw new Error(`task ${i} not accepted: ${res.status} ${await res.text()}`);
    ids.push(((await res.json()) as { task_id: string }).task_id);
  }
  return ids;
}

/** A request's status, Retry-After and body; status 0 when the service did not answer at all. */
const ask = async (url: string, init?: RequestInit) => {
  try {
    const res = await fetch(url, init);
    return {
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      body: (await res.json()) as any,
    };
  } catch (err) {
    return { status: 0, retryAfter: null, body: { error: String((err as Error).cause ?? err) } };
  }
};
const get = (url: string) => ask(url);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The services that use the database (the tool-server does not). */
const USES_DATABASE = ['agent-api', 'worker-1', 'worker-2', 'gateway-1', 'gateway-2'];

/** What a run with the database stopped for `outageMs` under load saw; the test judges it. */
export interface OutageReport {
  /** Processes that exited, at any point. */
  dead: string[];
  /** Each task's status as the database was stopped. */
  atHalt: string[];
  /** Each service's /health (with detail) while the database was down, after a few seconds. */
  healthDuring: Record<string, { status: number; body: any }>;
  /** A task read (needs the database) and a task submitted during the outage. */
  readDuring: { status: number; retryAfter: string | null; body: any };
  submitDuring: { status: number; retryAfter: string | null; body: any };
  /** Each task as stored once all ended, with its events. */
  tasks: any[];
  healthAfter: Record<string, { status: number; body: any }>;
}

/** Runs `n` tasks, stops PostgreSQL for `outageMs` while they run, and waits for every task's end. */
export async function outageRun(stack: ChaosStack, n: number, outageMs: number): Promise<OutageReport> {
  const dead = new Set<string>();
  const watch = setInterval(() => {
    for (const s of stack.dead()) dead.add(s.name);
  }, 100);
  try {
    const ids = await submitTasks(stack.api, n, `outage${outageMs}`);
    // Tasks are under way (the first ones have made a model call or two) before the database goes.
    const underWay = Date.now() + 60_000;
    for (;;) {
      const first = await Promise.all(
        ids.slice(0, 8).map(async (id) => (await get(`${stack.api.url}/agent/tasks/${id}`)).body),
      );
      const calling = first.filter(
        (t) =>
          t.status === 'running' && (t.events ?? []).filter((e: any) => e.type === 'model_call').length >= 2,
      );
      if (calling.length >= 2 || Date.now() > underWay) break;
      await pause(100);
    }
    const atHalt = await Promise.all(
      ids.map(async (id) => (await get(`${stack.api.url}/agent/tasks/${id}`)).body.status as string),
    );
    stack.pg.halt();
    const downAt = Date.now();
    // Once every service that uses the database has noticed it gone (or half the outage has passed).
    const healthDuring: OutageReport['healthDuring'] = {};
    for (const noticed = downAt + outageMs / 2; ; ) {
      for (const s of stack.services) healthDuring[s.name] = await get(`${s.url}/health`);
      const down = USES_DATABASE.every((name) => healthDuring[name]?.body?.database?.state === 'unreachable');
      if (down || Date.now() > noticed) break;
      await pause(100);
    }
    const readDuring = await get(`${stack.api.url}/agent/tasks/${ids[0]}`);
    const submitDuring = await ask(`${stack.api.url}/agent/execute_task`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ goal: '[bench during] read the notes', wait: false }),
    });
    // The outage lasts outageMs: the scenario's length, not a wait for something.
    await pause(Math.max(0, outageMs - (Date.now() - downAt)));
    stack.pg.restart();
    const deadline = Date.now() + 180_000 + outageMs;
    // Each task as last read; only those not yet finished are read again.
    const latest = new Map<string, any>();
    for (;;) {
      const open = ids.filter((id) => !latest.get(id)?.finished_at);
      for (const [i, t] of (
        await Promise.all(open.map(async (id) => (await get(`${stack.api.url}/agent/tasks/${id}`)).body))
      ).entries())
        latest.set(open[i], t);
      if (ids.every((id) => latest.get(id)?.finished_at)) break;
      if (Date.now() > deadline || stack.api.child.exitCode !== null) break;
      await pause(150);
    }
    const tasks = ids.map((id) => latest.get(id));
    const healthAfter: OutageReport['healthAfter'] = {};
    for (const s of stack.services) healthAfter[s.name] = await get(`${s.url}/health`);
    for (const s of stack.dead()) dead.add(s.name);
    return { dead: [...dead], atHalt, healthDuring, readDuring, submitDuring, tasks, healthAfter };
  } finally {
    clearInterval(watch);
  }
}

/** What every outage run must show (issue 32, item 8). */
export function expectRodeItOut(report: OutageReport, stack: ChaosStack): void {
  const logs = () => stack.services.map((s) => `--- ${s.name}\n${s.log().slice(-4000)}`).join('\n');
  // No process exited.
  expect(report.dead, logs()).toEqual([]);
  // The outage came while tasks ran (none had ended yet).
  expect(report.atHalt.filter((s) => s === 'running').length).toBeGreaterThan(0);
  expect(
    report.atHalt.every((s) => s === 'running' || s === 'queued'),
    report.atHalt.join(),
  ).toBe(true);
  // While it was down, every service that uses it said so: degraded, the database unreachable since when.
  for (const name of ['agent-api', 'worker-1', 'worker-2', 'gateway-1', 'gateway-2']) {
    expect(report.healthDuring[name], name).toMatchObject({
      status: 200,
      body: {
        status: 'degraded',
        database: { state: 'unreachable', since: expect.any(String), error: expect.any(String) },
      },
    });
  }
  expect(report.healthDuring['tool-server'].body.status).toBe('ok');
  // What needs it was refused with 503 and Retry-After, naming the database.
  for (const refused of [report.readDuring, report.submitDuring]) {
    expect(refused).toMatchObject({ status: 503, retryAfter: '5', body: { code: 'store_unavailable' } });
    expect(refused.body.error).toMatch(/^The database \(PostgreSQL, DATABASE_URL\) is unreachable since /);
  }
  // Every task ended as it would have without the outage: completed, its answer, its events complete.
  const notOk = report.tasks.filter((t) => t.status !== 'completed');
  expect(
    notOk.map((t) => [t.task_id, t.status, t.error]),
    logs(),
  ).toEqual([]);
  for (const t of report.tasks) {
    expect(t.final_answer).toMatch(/^done outage/);
    const types: string[] = t.events.map((e: any) => e.type);
    expect(t.events.map((e: any) => e.seq)).toEqual(t.events.map((_: unknown, i: number) => i + 1));
    expect(types.filter((x) => x === 'task_started')).toHaveLength(1);
    expect(types.filter((x) => x === 'task_finished')).toHaveLength(1);
    expect(types.at(-1)).toBe('task_finished');
    expect(types.filter((x) => x === 'model_call')).toHaveLength(READS + 2);
    // Its reads all ran and answered (the activation is a toolset_change).
    const calls = t.events.filter((e: any) => e.type === 'tool_call');
    expect(calls.map((e: any) => e.data.ok)).toEqual(Array(READS).fill(true));
    expect(types).toContain('toolset_change');
    // It went on where it ran: its worker kept (or took back) its lease; it was never taken over.
    expect(types).not.toContain('task_resumed');
  }
  // Nothing was reported failed: no task, and no worker logged one.
  for (const s of stack.services) {
    expect(s.log(), s.name).not.toMatch(/"status":"failed"|ended unrecorded|nothing handled it/);
    expect(s.log(), s.name).not.toMatch(/lost the lease|requeued tasks whose lease lapsed/);
  }
  // Back, every service says ok.
  for (const [name, h] of Object.entries(report.healthAfter)) expect(h.body.status, name).toBe('ok');
}
