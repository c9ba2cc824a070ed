import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentServer } from '../../agent-server/server.ts';
import { completion, type ScriptedTurn } from '../../bench/mock-model.ts';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { freshDatabase } from '../helpers/postgres.ts';
import { isAlive } from '../helpers/processes.ts';

// Several worker processes (`toolshift serve worker`) and the agent API (AGENT_ROLE=api) on one PostgreSQL
// database, the model a scripted OpenAI endpoint on loopback. A worker killed with SIGKILL mid-call: its task
// finishes on the other worker, its events gap-free, and the call in flight (not idempotent) is not run twice.
// A worker frozen (SIGSTOP) past its lease: the other finishes its task, and when it wakes its late writes
// are refused.

const BIN = path.resolve('bin/toolshift.js');
const LEDGER_SERVER = path.resolve('tests/fixtures/mcp/ledger-server.mjs');

let tmp: string;
let databaseUrl: string;
let ledger: string;
let model: { url: string; close: () => Promise<void>; arrivals: string[]; releaseHeld: () => void };
const services: Listening[] = [];
let api: Listening;
let gatewayUrl: string;
const workers: { child: ChildProcess; log: () => string; pid: number }[] = [];

/** The scripted model: a reply per task (the marker its goal starts with) and turn. */
function startModel(): Promise<typeof model> {
  const arrivals: string[] = [];
  let releaseHeld: () => void = () => {};
  const held = new Promise<void>((r) => {
    releaseHeld = r;
  });
  const script = (key: string, turn: number, arrival: number): ScriptedTurn | Promise<ScriptedTurn> => {
    if (key === 'kill') {
      if (turn === 0)
        return {
          calls: [
            {
              id: 'call_activate',
              name: 'manage_toolsets',
              arguments: { action: 'ACTIVATE', toolset_ids: ['ledger'] },
            },
          ],
        };
      if (turn === 1)
        return {
          calls: [{ id: 'call_append', name: 'append_line', arguments: { line: 'once', hold_ms: 4000 } }],
        };
      return { answer: 'ledger done' };
    }
    // `freeze`: the first worker's call is held until the test releases it; the next worker's is answered.
    if (arrival === 1) return held.then(() => ({ answer: 'late answer from the frozen worker' }));
    return { answer: 'answered by the live worker' };
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        messages: { role: string; content: unknown }[];
      };
      const goal = String(body.messages.find((m) => m.role === 'user')?.content ?? '');
      const key = /^\[(\w+)\]/.exec(goal)?.[1] ?? 'unknown';
      const turn = body.messages.filter((m) => m.role === 'assistant').length;
      arrivals.push(`${key}:${turn}`);
      const turnReply = await script(key, turn, arrivals.filter((a) => a.startsWith(`${key}:`)).length);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(completion(turnReply)));
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        arrivals,
        releaseHeld: () => releaseHeld(),
        close: () =>
          new Promise<void>((r) => {
            server.closeAllConnections();
            server.close(() => r());
          }),
      });
    });
  });
}

const baseEnv = () => ({
  TOOLSHIFT_AUTH: 'none',
  DATABASE_URL: databaseUrl,
  OPENAI_BASE_URL: model.url,
  OPENAI_API_KEY: 'test-key',
  TASK_LEASE_S: '1',
  LOG_LEVEL: 'info',
  LOG_FORMAT: 'json',
});

/** A worker process, once it listens (for /health). */
async function startWorker(name: string, gatewayUrl: string) {
  const child = spawn(process.execPath, [BIN, 'serve', 'worker'], {
    env: {
      PATH: process.env.PATH,
      HOME: tmp,
      ...baseEnv(),
      GATEWAY_URL: gatewayUrl,
      AGENT_PORT: '0',
      TOOLSHIFT_DATA_DIR: path.join(tmp, name),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c;
  });
  child.stderr?.on('data', (c: Buffer) => {
    out += c;
  });
  await new Promise<void>((resolve, reject) => {
    const check = () => {
      if (out.includes('agent-server listening')) return resolve();
      if (child.exitCode !== null) return reject(new Error(`the worker exited: ${out}`));
      setTimeout(check, 50);
    };
    check();
  });
  const worker = { child, log: () => out, pid: child.pid as number };
  workers.push(worker);
  return worker;
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-workers-'));
  databaseUrl = await freshDatabase('workers');
  ledger = path.join(tmp, 'ledger.txt');
  await writeFile(ledger, '');
  model = await startModel();
  const dataDir = path.join(tmp, 'gateway');
  await mkdir(path.join(dataDir, 'toolsets'), { recursive: true });
  await writeFile(
    path.join(dataDir, 'toolsets', 'ledger.yaml'),
    `id: ledger
description: Append lines to a ledger.
backend:
  mcp:
    command: ${process.execPath}
    args: [${LEDGER_SERVER}]
    env:
      LEDGER: ${ledger}
`,
  );
  const config = loadConfig({
    ...baseEnv(),
    AGENT_ROLE: 'api',
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSHIFT_DATA_DIR: dataDir,
    FS_ROOTS: tmp,
    LOG_LEVEL: 'silent',
  });
  const tools = await startToolServer(config, { announce: false });
  config.tools.url = tools.url;
  const gateway = await startGateway(config, { announce: false });
  config.gateway.url = gateway.url;
  api = await startAgentServer(config, { announce: false });
  services.push(api, gateway, tools);
  gatewayUrl = gateway.url;
  await startWorker('worker-a', gateway.url);
  await startWorker('worker-b', gateway.url);
}, 60_000);

afterAll(async () => {
  for (const w of workers) if (isAlive(w.pid)) w.child.kill('SIGKILL');
  for (const s of services) await s.close();
  await model?.close();
  await rm(tmp, { recursive: true, force: true });
});

async function post(url: string, body: unknown) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}
const taskOf = async (id: string) => (await (await fetch(`${api.url}/agent/tasks/${id}`)).json()) as any;

/** The worker holding the task's lease (its name carries its process id). */
async function holderOf(taskId: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const res = await client.query('SELECT lease_owner FROM tasks WHERE task_id = $1', [taskId]);
    const owner = res.rows[0]?.lease_owner as string | null;
    const pid = owner ? Number(owner.split(':')[1]) : undefined;
    return workers.find((w) => w.pid === pid);
  } finally {
    await client.end();
  }
}

function expectGapFree(events: { seq: number }[]) {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
}

describe('worker processes on one PostgreSQL database', () => {
  it('a worker killed mid-call: the task finishes on the other, and the call in flight is not run twice', async () => {
    const submitted = await post(`${api.url}/agent/execute_task`, { goal: '[kill] write once', wait: false });
    expect(submitted.status).toBe(202);
    expect(submitted.body.status).toBe('queued');
    const taskId = submitted.body.task_id as string;
    // The call has had its effect and has not ended (the server holds its answer for 4 s).
    await expect.poll(() => readFile(ledger, 'utf8'), { timeout: 20_000 }).toBe('once\n');
    const victim = await holderOf(taskId);
    expect(victim).toBeDefined();
    const survivor = workers.find((w) => w !== victim) as (typeof workers)[number];
    victim?.child.kill('SIGKILL');
    await expect.poll(() => isAlive(victim?.pid as number)).toBe(false);

    // The lease lapses (1 s), the survivor claims the task, finds the call of unknown outcome, and asks.
    await expect
      .poll(async () => (await taskOf(taskId)).status, { timeout: 20_000 })
      .toBe('awaiting_approval');
    const approvals = (await (await fetch(`${api.url}/agent/approvals`)).json()) as any;
    expect(approvals.approvals).toEqual([
      expect.objectContaining({ task_id: taskId, kind: 'unknown_outcome', subject: 'append_line' }),
    ]);
    // Skipped: the task goes on on the survivor, and the ledger keeps its one line.
    const decided = await post(`${api.url}/agent/tasks/${taskId}/approvals/call_append`, { approve: false });
    expect(decided.status).toBe(200);
    await expect.poll(async () => (await taskOf(taskId)).status, { timeout: 20_000 }).toBe('completed');
    const task = await taskOf(taskId);
    expect(task.final_answer).toBe('ledger done');
    expect(await readFile(ledger, 'utf8')).toBe('once\n');
    expectGapFree(task.events);
    const resumed = task.events.filter((e: any) => e.type === 'task_resumed');
    expect(resumed).toHaveLength(1);
    expect(resumed[0].data).toMatchObject({ unknown: 'append_line', rerun: false });
    expect(resumed[0].data.worker).toContain(`:${survivor.pid}:`);
    expect(isAlive(survivor.pid)).toBe(true);
  }, 60_000);

  it('a worker frozen past its lease: the other finishes the task, and the frozen one’s late writes are refused', async () => {
    // Two live workers again (one was killed above).
    if (workers.filter((w) => isAlive(w.pid)).length < 2) await startWorker('worker-c', gatewayUrl);
    const submitted = await post(`${api.url}/agent/execute_task`, { goal: '[freeze] answer', wait: false });
    const taskId = submitted.body.task_id as string;
    await expect
      .poll(() => model.arrivals.filter((a) => a === 'freeze:0').length, { timeout: 20_000 })
      .toBe(1);
    const frozen = (await holderOf(taskId)) as (typeof workers)[number];
    frozen.child.kill('SIGSTOP');
    try {
      await expect.poll(async () => (await taskOf(taskId)).status, { timeout: 20_000 }).toBe('completed');
    } finally {
      frozen.child.kill('SIGCONT');
    }
    // Awake, the frozen worker gets its model's (late) answer and tries to record it and end the task.
    model.releaseHeld();
    await expect.poll(() => frozen.log(), { timeout: 20_000 }).toContain('lost the lease of a running task');
    const task = await taskOf(taskId);
    expect(task.final_answer).toBe('answered by the live worker');
    expectGapFree(task.events);
    expect(JSON.stringify(task.events)).not.toContain('late answer');
    expect(task.events.filter((e: any) => e.type === 'task_finished')).toHaveLength(1);
    expect(isAlive(frozen.pid)).toBe(true);
  }, 60_000);
});
