import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentServer } from '../../agent-server/server.ts';
import { completion, type ScriptedTurn } from '../../bench/mock-model.ts';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { freshDatabase } from '../helpers/postgres.ts';
import { isAlive } from '../helpers/processes.ts';
import { SPLIT_TOOLSETS } from '../helpers/stack.ts';

// Issue 32 item 7, the chaos run made a test: two gateway replica processes on one PostgreSQL behind a
// round-robin TCP balancer (the test's), a tool-server, the agent, and a scripted model that, like the model
// of the chaos run, makes a failed call again. Each task appends two lines to its own file with edit_file
// (not idempotent). The tool-server's answers are held a moment on their way back to the gateway, so calls
// are mid-flight when one replica is killed with SIGKILL. No line may appear twice, and no call that ran may
// be reported to the model as failed: a call whose answer died with the replica waits for a human.

const BIN = path.resolve('bin/toolshift.js');
const TASKS = 6;
/** How long the tool-server's answers wait on their way to the gateway (the calls' window to be killed in). */
const HOLD_MS = 1500;

let tmp: string;
let workspace: string;
const closers: (() => Promise<void>)[] = [];
const replicas: { name: string; child: ChildProcess; url: string; pid: number }[] = [];
let agent: Listening;
/** Tool calls the tool-server has run and whose answers are held, by the replica that sent them. */
const held = new Map<string, number>();
/** Every tool message the model was sent, by task. */
const toldModel = new Map<string, string[]>();

const onClose = (server: http.Server | net.Server) => () =>
  new Promise<void>((r) => {
    if ('closeAllConnections' in server) server.closeAllConnections();
    server.close(() => r());
  });

async function listenOn(server: http.Server | net.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  closers.push(onClose(server));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The scripted model: per task, activate fs_write, append two lines, answer; a failed call is made again. */
async function startModel(): Promise<string> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        messages: {
          role: string;
          content: unknown;
          tool_call_id?: string;
          tool_calls?: { id: string; function: { name: string; arguments: string } }[];
        }[];
      };
      const goal = String(body.messages.find((m) => m.role === 'user')?.content ?? '');
      const task = /^\[(t\d+)\]/.exec(goal)?.[1] ?? 'unknown';
      const tools = body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
      // What the model was told of its edits (a tool message answers the call of its id).
      const editIds = new Set(
        body.messages.flatMap((m) =>
          (m.tool_calls ?? []).filter((c) => c.function.name === 'edit_file').map((c) => c.id),
        ),
      );
      toldModel.set(
        task,
        body.messages
          .filter((m) => m.role === 'tool' && editIds.has(String(m.tool_call_id)))
          .map((m) => String(m.content)),
      );
      const asked = body.messages.filter((m) => m.role === 'assistant');
      const last = tools.at(-1);
      const n = asked.length;
      let turn: ScriptedTurn;
      if (last?.startsWith('Error') && !last.includes('may have taken effect')) {
        // Told it failed: the same call again (what a retrying model does).
        const again = asked.at(-1)?.tool_calls?.[0]?.function;
        turn = {
          calls: [
            { id: `call_${n}`, name: again?.name ?? '', arguments: JSON.parse(again?.arguments ?? '{}') },
          ],
        };
      } else {
        const edits = asked.filter((m) => m.tool_calls?.[0]?.function.name === 'edit_file').length;
        if (n === 0)
          turn = {
            calls: [
              {
                id: 'call_0',
                name: 'manage_toolsets',
                arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
              },
            ],
          };
        else if (edits < 2) {
          const line = `${task}-line-${edits}`;
          turn = {
            calls: [
              {
                id: `call_${n}`,
                name: 'edit_file',
                arguments: { path: `${task}.txt`, edits: [{ old_text: 'END', new_text: `${line}\nEND` }] },
              },
            ],
          };
        } else turn = { answer: `${task} done` };
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(completion(turn)));
    });
  });
  return `${await listenOn(server)}/v1`;
}

/**
 * Between the gateways and the tool-server: forwards each request at once (the tool runs), then holds the
 * answer HOLD_MS before relaying it. Which replica sent a call is told by its TOOL_SERVER_TOKEN.
 */
async function startSlowAnswers(toolServer: string): Promise<string> {
  const server = http.createServer((req, res) => {
    const replica = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? 'none';
    const headers = { ...req.headers };
    delete headers.authorization;
    const up = http.request(`${toolServer}${req.url}`, { method: req.method, headers }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('end', () => {
        const call = req.method === 'POST';
        if (call) held.set(replica, (held.get(replica) ?? 0) + 1);
        setTimeout(
          () => {
            if (call) held.set(replica, (held.get(replica) ?? 1) - 1);
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(Buffer.concat(chunks));
          },
          call ? HOLD_MS : 0,
        );
      });
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  return listenOn(server);
}

/** A round-robin TCP balancer over the replicas; a replica that refuses the connection is passed over. */
async function startBalancer(): Promise<string> {
  let next = 0;
  const server = net.createServer((client) => {
    client.pause();
    const order = replicas.map((_, i) => replicas[(next + i) % replicas.length]);
    next++;
    const attempt = (i: number) => {
      const target = order[i];
      if (!target) return client.destroy();
      const { port } = new URL(target.url);
      const upstream = net.connect(Number(port), '127.0.0.1');
      upstream.once('error', () => attempt(i + 1));
      upstream.once('connect', () => {
        upstream.removeAllListeners('error');
        upstream.on('error', () => client.destroy());
        upstream.on('close', () => client.destroy());
        client.on('error', () => upstream.destroy());
        client.on('close', () => upstream.destroy());
        client.pipe(upstream).pipe(client);
        client.resume();
      });
    };
    attempt(0);
  });
  return listenOn(server);
}

async function startReplica(name: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, 'serve', 'mcp-gateway'], {
    env: {
      PATH: process.env.PATH,
      HOME: tmp,
      ...env,
      TOOL_SERVER_TOKEN: name,
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
  const url = await new Promise<string>((resolve, reject) => {
    const check = () => {
      const found = /"url":"(http:\/\/[^"]+)"[^\n]*mcp-gateway listening/.exec(out);
      if (found) return resolve(found[1]);
      if (child.exitCode !== null) return reject(new Error(`the replica exited: ${out}`));
      setTimeout(check, 50);
    };
    check();
  });
  replicas.push({ name, child, url, pid: child.pid as number });
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-chaos-'));
  workspace = path.join(tmp, 'workspace');
  const toolsets = path.join(tmp, 'toolsets');
  await mkdir(workspace);
  await mkdir(toolsets);
  for (const [name, body] of Object.entries(SPLIT_TOOLSETS)) await writeFile(path.join(toolsets, name), body);
  for (let i = 0; i < TASKS; i++) await writeFile(path.join(workspace, `t${i}.txt`), 'END');
  const databaseUrl = await freshDatabase('chaos');
  const base = {
    HOST: '127.0.0.1',
    TOOLSHIFT_AUTH: 'none',
    DATABASE_URL: databaseUrl,
    TOOLSETS_DIR: toolsets,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
  };
  const tools = await startToolServer(
    loadConfig({
      ...base,
      LOG_LEVEL: 'silent',
      TOOL_SERVER_PORT: '0',
      FS_ROOTS: workspace,
      TOOLSHIFT_DATA_DIR: path.join(tmp, 'tools'),
    }),
    { announce: false },
  );
  closers.push(() => tools.close());
  const slow = await startSlowAnswers(tools.url);
  const gatewayEnv = { ...base, GATEWAY_PORT: '0', TOOL_SERVER_URL: slow };
  await Promise.all([startReplica('replica-a', gatewayEnv), startReplica('replica-b', gatewayEnv)]);
  const balancer = await startBalancer();
  const config = loadConfig({
    ...base,
    LOG_LEVEL: 'silent',
    AGENT_PORT: '0',
    GATEWAY_URL: balancer,
    OPENAI_BASE_URL: await startModel(),
    OPENAI_API_KEY: 'test-key',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'agent'),
  });
  agent = await startAgentServer(config, { announce: false });
}, 90_000);

afterAll(async () => {
  await agent?.close().catch(() => undefined);
  for (const r of replicas) if (isAlive(r.pid)) r.child.kill('SIGKILL');
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  await rm(tmp, { recursive: true, force: true });
});

async function api(method: 'GET' | 'POST', route: string, body?: unknown) {
  const res = await fetch(`${agent.url}${route}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('a gateway replica killed mid-call behind a balancer', () => {
  it('runs no edit twice, and tells the model of no failure of a call that ran', async () => {
    const ids: string[] = [];
    for (let i = 0; i < TASKS; i++) {
      const submitted = await api('POST', '/agent/execute_task', {
        goal: `[t${i}] append two lines`,
        wait: false,
      });
      expect(submitted.status).toBe(202);
      ids.push(submitted.body.task_id);
    }
    // Replica A has a call whose effect happened and whose answer it is waiting for: kill it now.
    await expect.poll(() => held.get('replica-a') ?? 0, { timeout: 30_000, interval: 20 }).toBeGreaterThan(0);
    const victim = replicas.find((r) => r.name === 'replica-a') as (typeof replicas)[number];
    victim.child.kill('SIGKILL');
    await expect.poll(() => isAlive(victim.pid)).toBe(false);

    // Every task ends or waits for a human; none is left running.
    const settled = async () => {
      const tasks = await Promise.all(ids.map(async (id) => (await api('GET', `/agent/tasks/${id}`)).body));
      return tasks.every((t) => t.status === 'completed' || t.status === 'awaiting_approval')
        ? tasks
        : undefined;
    };
    await expect.poll(settled, { timeout: 60_000, interval: 200 }).toBeDefined();
    const tasks = (await settled()) as any[];
    const waiting = tasks.filter((t) => t.status === 'awaiting_approval');
    // The kill caught at least one call mid-flight; each such task asks about exactly that call.
    expect(waiting.length).toBeGreaterThan(0);
    for (const t of waiting) {
      const asked = t.events.filter((e: any) => e.type === 'approval_needed').at(-1);
      expect(asked.data).toMatchObject({ kind: 'unknown_outcome', subject: 'edit_file' });
    }
    // A human skips each: the model is told the edit may have run, and the task finishes.
    for (const t of waiting) {
      const asked = t.events.filter((e: any) => e.type === 'approval_needed').at(-1);
      const decided = await api('POST', `/agent/tasks/${t.task_id}/approvals/${asked.data.call_id}`, {
        approve: false,
      });
      expect(decided.status).toBe(200);
    }
    const finished = async () => {
      const all = await Promise.all(ids.map(async (id) => (await api('GET', `/agent/tasks/${id}`)).body));
      return all.every((t) => t.status === 'completed') ? all : undefined;
    };
    await expect.poll(finished, { timeout: 60_000, interval: 200 }).toBeDefined();

    for (let i = 0; i < TASKS; i++) {
      const text = await readFile(path.join(workspace, `t${i}.txt`), 'utf8');
      // Each line at most once, in order, and the file ends as it began.
      const lines = text.split('\n');
      expect(lines.at(-1)).toBe('END');
      expect(new Set(lines).size).toBe(lines.length);
      // The model never heard a lost answer as a failure: no transport error reached it.
      for (const said of toldModel.get(`t${i}`) ?? [])
        expect(said).not.toMatch(/socket|Cannot reach|Bad Gateway|ECONNRESET/);
    }
    // No event recorded a failed edit: every edit either succeeded or was skipped by the human as unknown.
    for (const t of (await finished()) as any[]) {
      for (const e of t.events.filter(
        (x: any) => x.type === 'tool_call' && x.data.name === 'edit_file' && !x.data.ok,
      ))
        expect(e.data.output).toMatch(/^Error: edit_file was not run again\. .*may have taken effect/);
    }
  }, 150_000);
});
