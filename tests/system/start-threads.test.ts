import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { threadsWanted } from '../../start/threads.ts';
import { bearerOf } from '../helpers/credentials.ts';
import { completion } from '../helpers/msw.ts';

// `npm start` on one thread and on two (the gateway and the tool-server on a worker thread): the same task
// runs end to end on both, SIGTERM closes every service with exit 0 and nothing queued lost (the gateway's
// audit rows are committed by its thread on close), and a start-up failure inside the worker thread still
// ends the process with exit 1 and the reason.

let tmp: string;
let model: Server;
let modelUrl: string;

const call = (id: string, name: string, args: unknown) =>
  completion({ tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }] });

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-threads-'));
  // Each task's goal names the file to write; the turn is the number of assistant messages so far.
  model = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const { messages } = JSON.parse(body) as { messages: { role: string; content: string }[] };
      // The goal as sent: a note of a toolset activated for it may follow.
      const file = String(messages.find((m) => m.role === 'user')?.content).split('\n\n')[0];
      const turn = messages.filter((m) => m.role === 'assistant').length;
      const replies = [
        call('a', 'manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }),
        call('w', 'write_file', { path: file, content: `written by ${file}` }),
        completion({ content: 'done' }),
      ];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(replies[Math.min(turn, 2)]));
    });
  });
  await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
  modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  await new Promise((r) => model.close(r));
  await rm(tmp, { recursive: true, force: true });
});

/** Starts start/start.ts with `env`; resolves with the agent's URL once all three services listen. */
function start(env: Record<string, string>) {
  const child = spawn(process.execPath, ['start/start.ts'], {
    env: {
      PATH: process.env.PATH,
      HOME: tmp,
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      OPENAI_BASE_URL: modelUrl,
      OPENAI_API_KEY: 'sk-test',
      LOG_FORMAT: 'json',
      // Started together, the services say where they listen at debug only (start/start.ts prints the ready line).
      LOG_LEVEL: 'debug',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const listening = new Promise<{ agent: string; pids: Set<number> }>((resolve, reject) => {
    const urls: Record<string, string> = {};
    const pids = new Set<number>();
    let buffer = '';
    child.stdout.on('data', (c: Buffer) => {
      buffer += c;
      for (let nl = buffer.indexOf('\n'); nl !== -1; nl = buffer.indexOf('\n')) {
        const line = JSON.parse(buffer.slice(0, nl)) as {
          name: string;
          msg: string;
          url?: string;
          pid: number;
        };
        buffer = buffer.slice(nl + 1);
        if (line.msg.endsWith('listening')) {
          urls[line.name] = String(line.url);
          pids.add(line.pid);
        }
        if (Object.keys(urls).length === 3) resolve({ agent: urls['agent-server'], pids });
      }
    });
    void exited.then((code) => reject(new Error(`start/start.ts exited (${code}): ${stderr}`)));
  });
  return { child, listening, exited, stderr: () => stderr };
}

describe('npm start threads', () => {
  it('takes TOOLSHIFT_THREADS as 1 (the default) or 2', () => {
    expect(threadsWanted({ TOOLSHIFT_THREADS: '1' })).toBe(1);
    expect(threadsWanted({ TOOLSHIFT_THREADS: ' 2 ' })).toBe(2);
    expect(threadsWanted({})).toBe(1);
    expect(() => threadsWanted({ TOOLSHIFT_THREADS: '3' })).toThrow(
      'TOOLSHIFT_THREADS must be 1 or 2 (got "3")',
    );
  });

  for (const threads of ['1', '2']) {
    it(`runs a task end to end and closes cleanly on SIGTERM (TOOLSHIFT_THREADS=${threads})`, async () => {
      const dir = path.join(tmp, `t${threads}`);
      await mkdir(path.join(dir, 'ws'), { recursive: true });
      const s = start({
        TOOLSHIFT_THREADS: threads,
        TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
        FS_ROOTS: path.join(dir, 'ws'),
      });
      const { agent, pids } = await s.listening;
      // One process either way.
      expect(pids.size).toBe(1);
      const files = ['one.txt', 'two.txt', 'three.txt'];
      const results = await Promise.all(
        files.map(async (goal) => {
          const res = await fetch(`${agent}/agent/execute_task`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              ...bearerOf(path.join(dir, 'data'), 'AGENT_API_TOKEN'),
            },
            body: JSON.stringify({ goal }),
          });
          return (await res.json()) as { status: string };
        }),
      );
      expect(results.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
      for (const f of files) expect(await readFile(path.join(dir, 'ws', f), 'utf8')).toBe(`written by ${f}`);
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
      // Nothing on stderr but the ready line: where to call, where the credentials are, what to try next.
      expect(s.stderr()).toMatch(
        /^toolshift ready: agent API http:\/\/127\.0\.0\.1:\d+, MCP endpoint http:\/\/127\.0\.0\.1:\d+\/mcp, console http:\/\/127\.0\.0\.1:\d+\/console\/login\?code=[\w-]{32}; model \S+ \(openai-chat\); data in \S+ \(SQLite\), files in \S+; credentials in \S+credentials\.json; next: npx toolshift toolsets\n$/,
      );
      // Committed before the process ended: each call's audit row and each task's end.
      const gatewayDb = new Database(path.join(dir, 'data', 'gateway.db'), { readonly: true });
      const calls = gatewayDb
        .prepare("SELECT subject, ok FROM audit WHERE kind = 'call' ORDER BY id")
        .all() as { subject: string; ok: number }[];
      gatewayDb.close();
      expect(calls).toEqual(files.map(() => ({ subject: 'write_file', ok: 1 })));
      const agentDb = new Database(path.join(dir, 'data', 'agent.db'), { readonly: true });
      const ended = agentDb
        .prepare("SELECT COUNT(*) AS n FROM task_events WHERE type = 'task_finished'")
        .get() as { n: number };
      const statuses = agentDb.prepare('SELECT status FROM tasks').all() as { status: string }[];
      agentDb.close();
      expect(ended.n).toBe(3);
      expect(statuses.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    });
  }

  it('ends the process with exit 1 and the reason when a service fails to start on the worker thread', async () => {
    const dir = path.join(tmp, 'bad');
    await mkdir(path.join(dir, 'toolsets'), { recursive: true });
    await writeFile(path.join(dir, 'toolsets', 'notes.yaml'), 'id: notes\ndescription: Notes.\ntool: [x]\n');
    const s = start({
      TOOLSHIFT_THREADS: '2',
      TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
      FS_ROOTS: tmp,
      TOOLSETS_DIR: path.join(dir, 'toolsets'),
    });
    s.listening.catch(() => {});
    expect(await s.exited).toBe(1);
    expect(s.stderr()).toMatch(/^toolshift failed to start: .*notes\.yaml.*unknown key tool/);
  });
});
