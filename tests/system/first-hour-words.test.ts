import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearerOf } from '../helpers/credentials.ts';
import { startDaemon } from '../helpers/daemon.ts';
import { completion } from '../helpers/msw.ts';

// Issue 16, what `npm start` said to a new user: three "listening" blocks, one per service, before the
// banner; every toolset change logged twice (by the agent and by the gateway); on HOST=0.0.0.0 one missing
// token named per attempt (three restarts to learn them all); and execute_task took a misspelt field without
// a word. Here the real daemon, as `npm start` runs it.

const run = promisify(execFile);
let tmp: string;
let model: Server;
let modelUrl: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'first-hour-words-'));
  // Activates file_system_tools, then answers: the turn is the number of assistant messages so far.
  model = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const { messages } = JSON.parse(body) as { messages: { role: string }[] };
      const turn = messages.filter((m) => m.role === 'assistant').length;
      const activate = {
        id: 'a',
        type: 'function',
        function: {
          name: 'manage_toolsets',
          arguments: JSON.stringify({ action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }),
        },
      };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(turn === 0 ? completion({ tool_calls: [activate] }) : completion({ content: 'done' })),
      );
    });
  });
  await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
  modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  await new Promise((r) => model.close(r));
  await rm(tmp, { recursive: true, force: true });
});

type Line = { name: string; msg: string; level: number; url?: string; task?: string };
const INFO = 30;
const DEBUG = 20;

/** The JSON log lines a daemon wrote on stdout so far. */
function logLines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Line);
}

const READY =
  /^toolshift ready: agent API (http:\/\/127\.0\.0\.1:\d+), MCP endpoint (http:\/\/127\.0\.0\.1:\d+)\/mcp, console \1\/console\/login\?code=[\w-]{32}; model gpt-4o-mini \(openai-chat\); data in (\S+) \(SQLite\), files in (\S+); credentials in (\S+); next: npx toolshift toolsets\n$/;

describe('npm start, in its own words', () => {
  it('prints one ready line, no listening blocks, and each toolset change once; the CLI and execute_task agree on its fields', async () => {
    const dir = path.join(tmp, 'ready');
    const data = path.join(dir, 'data');
    await mkdir(path.join(dir, 'ws'), { recursive: true });
    // At debug, to see what is kept out of the default (info) view as well as what is in it.
    const daemon = startDaemon({
      TOOLSHIFT_DATA_DIR: data,
      FS_ROOTS: path.join(dir, 'ws'),
      HOME: tmp,
      OPENAI_BASE_URL: modelUrl,
      OPENAI_API_KEY: 'sk-test',
    });
    let stdout = '';
    daemon.child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    try {
      const urls = await daemon.listening;
      await daemon.ready;
      // stderr: exactly the ready line — where the agent API and the MCP endpoint are, the data, what next.
      const ready = READY.exec(daemon.stderr());
      expect(ready, daemon.stderr()).not.toBeNull();
      expect(ready?.[1]).toBe(urls['agent-server']);
      expect(ready?.[2]).toBe(urls['mcp-gateway']);
      // Where the data, the files the tools may touch and the tokens are (from ~: HOME is the test's directory).
      const typed = (p = '') => path.resolve(p.replace(/^~(?=\/)/, tmp));
      expect(typed(ready?.[3])).toBe(data);
      expect(typed(ready?.[4])).toBe(path.join(dir, 'ws'));
      expect(typed(ready?.[5])).toBe(path.join(data, 'credentials.json'));
      // Where each service listens is logged, at debug only: the default view shows none of it.
      const listening = logLines(stdout).filter((l) => l.msg.endsWith(' listening'));
      expect(listening.map((l) => [l.name, l.level]).sort()).toEqual([
        ['agent-server', DEBUG],
        ['mcp-gateway', DEBUG],
        ['tool-server', DEBUG],
      ]);

      // A task through the CLI, with every field `run` can send: accepted (execute_task is strict).
      const cli = await run(
        process.execPath,
        [
          'client.ts',
          'run',
          '--quiet',
          '--session',
          'first-hour',
          '--max-steps',
          '5',
          '--max-duration',
          '60',
          '--exposure',
          'native',
          'look at the workspace',
        ],
        {
          env: {
            PATH: process.env.PATH,
            HOME: tmp,
            TOOLSHIFT_DATA_DIR: data,
            AGENT_URL: urls['agent-server'],
            GATEWAY_URL: urls['mcp-gateway'],
          },
        },
      );
      expect(cli.stdout.trim()).toBe('done');
      // The activation is logged once at info (by the gateway, which sees every client's); the agent's own
      // line, with the task's id, is at debug.
      const changes = logLines(stdout).filter((l) => l.msg === 'toolsets changed');
      expect(changes.filter((l) => l.level >= INFO).map((l) => l.name)).toEqual(['mcp-gateway']);
      expect(changes.filter((l) => l.level < INFO)).toEqual([
        expect.objectContaining({
          name: 'agent-server',
          level: DEBUG,
          task: expect.stringMatching(/^task_/),
        }),
      ]);

      // A misspelt field is refused, naming it and the fields execute_task takes; no task is started.
      const auth = bearerOf(data, 'AGENT_API_TOKEN');
      const before = (await (
        await fetch(`${urls['agent-server']}/agent/tasks`, { headers: auth })
      ).json()) as {
        tasks: unknown[];
      };
      const res = await fetch(`${urls['agent-server']}/agent/execute_task`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ goal: 'look again', max_step: 3, sesion_id: 'x' }),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe(
        'Invalid request body: unknown fields "max_step", "sesion_id"; execute_task takes goal, prompt, ' +
          'session_id, thread_id, if_busy, max_steps, max_duration_s, wait, exposure, prime, webhook',
      );
      const after = (await (
        await fetch(`${urls['agent-server']}/agent/tasks`, { headers: auth })
      ).json()) as {
        tasks: unknown[];
      };
      expect(after.tasks.length).toBe(before.tasks.length);
      // The published schema says so too.
      const openapi = (await (
        await fetch(`${urls['agent-server']}/openapi.json`, { headers: auth })
      ).json()) as {
        paths: Record<
          string,
          { post?: { requestBody: { content: Record<string, { schema: { $ref: string } }> } } }
        >;
        components: { schemas: Record<string, unknown> };
      };
      const ref =
        openapi.paths['/agent/execute_task'].post?.requestBody.content['application/json'].schema.$ref;
      expect(ref).toBe('#/components/schemas/ExecuteTaskRequest');
      expect(openapi.components.schemas.ExecuteTaskRequest).toMatchObject({ additionalProperties: false });
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
    // Still only the ready line on stderr after the task: nothing else was printed there.
    expect(daemon.stderr()).toMatch(READY);
  }, 90_000);

  it('shows no listening block in the pretty format either; a service started alone still says where it listens', async () => {
    const dir = path.join(tmp, 'pretty');
    await mkdir(path.join(dir, 'ws'), { recursive: true });
    const daemon = startDaemon({
      TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
      FS_ROOTS: path.join(dir, 'ws'),
      HOME: tmp,
      OPENAI_API_KEY: 'sk-test',
      LOG_FORMAT: 'pretty',
      LOG_LEVEL: 'info',
    });
    let stdout = '';
    daemon.child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    try {
      await daemon.ready;
      expect(daemon.stderr()).toMatch(READY);
      expect(stdout).not.toContain('listening');
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
    // `npm run start:agent`: the agent-server alone logs where it listens, at info.
    const alone = spawn(process.execPath, ['agent-server/main.ts'], {
      env: {
        PATH: process.env.PATH,
        HOME: tmp,
        AGENT_PORT: '0',
        TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
        LOG_FORMAT: 'json',
        OPENAI_BASE_URL: modelUrl,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const line = await new Promise<Line>((resolve, reject) => {
        let buffer = '';
        alone.stdout.on('data', (c: Buffer) => {
          buffer += c;
          const found = logLines(buffer.slice(0, buffer.lastIndexOf('\n') + 1)).find((l) =>
            l.msg.endsWith('listening'),
          );
          if (found) resolve(found);
        });
        alone.once('exit', (code) => reject(new Error(`agent-server exited (${code})`)));
      });
      expect(line).toMatchObject({ name: 'agent-server', level: INFO, msg: 'agent-server listening' });
      expect(line.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    } finally {
      alone.kill('SIGTERM');
      await new Promise((r) => alone.once('exit', r));
    }
  }, 90_000);

  it('names every token a non-loopback HOST still needs in one error, before anything listens', async () => {
    const dir = path.join(tmp, 'public');
    await mkdir(path.join(dir, 'ws'), { recursive: true });
    const attempt = async (env: Record<string, string>) => {
      const daemon = startDaemon({
        TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
        FS_ROOTS: path.join(dir, 'ws'),
        HOME: tmp,
        HOST: '0.0.0.0',
        TOOLSHIFT_AUTH: 'none',
        ...env,
      });
      expect(await daemon.exited).toBe(1);
      return daemon.stderr();
    };
    // HOME is the test's directory: the file is named from ~, as the user would type it.
    const file = `~/${path.relative(tmp, path.join(dir, 'data', 'credentials.json'))}`;
    expect(await attempt({})).toBe(
      'toolshift failed to start: HOST=0.0.0.0 is not a loopback address, and there every service needs its ' +
        'token (anyone who can reach the ports could use them). Missing:\n' +
        '  TOOL_SERVER_TOKEN, for the gateway, as the tool-server’s only client\n' +
        "  GATEWAY_ADMIN_TOKEN, for the gateway's operator (toolsets, reload, audit)\n" +
        '  GATEWAY_AGENT_TOKEN, for the agent-server, as a client of the gateway\n' +
        "  AGENT_API_TOKEN, for the agent-server's API (tasks, approvals)\n" +
        'Set each to a value of its own (and ALLOWED_HOSTS to the names clients use), or remove ' +
        `TOOLSHIFT_AUTH=none to have them made in ${file}, bind HOST=127.0.0.1, or set TOOLSHIFT_INSECURE=1 ` +
        'to accept the risk.\n',
    );
    // With some set, the rest, still all at once.
    const rest = await attempt({
      TOOL_SERVER_TOKEN: 'tool-token-0123456789',
      AGENT_API_TOKEN: 'api-token-0123456789',
    });
    expect(rest).toMatch(/Missing:\n {2}GATEWAY_ADMIN_TOKEN, .*\n {2}GATEWAY_AGENT_TOKEN, .*\nSet each/);
    expect(rest).not.toMatch(/TOOL_SERVER_TOKEN|AGENT_API_TOKEN,/);
  }, 60_000);
});
