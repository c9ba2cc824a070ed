import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearerOf } from '../helpers/credentials.ts';
import { completion } from '../helpers/msw.ts';

// `npm start` as a user runs it (start/start.ts in a child process, JSON logs on stdout), with the model played by
// an OpenAI-compatible server on loopback: one request id in the logs of all three services, failures logged
// with their reason, /metrics after a task, and no key or argument value in any log line.

const API_KEY = 'sk-live-key-0123456789-never-logged';
const SECRET_CONTENT = 'CONTENT-THAT-MUST-NOT-BE-LOGGED';

interface LogLine {
  name: string;
  level: number;
  msg: string;
  request_id?: string;
  [key: string]: unknown;
}

let tmp: string;
let model: Server;
let stack: ChildProcess;
const lines: LogLine[] = [];
let raw = '';
const urls: Record<string, string> = {};

/** The model's replies by goal; each call takes the next. A `status` reply is an error answer. */
const scripts: Record<string, { status?: number; body: unknown; headers?: Record<string, string> }[]> = {
  'write the report': [
    {
      status: 503,
      body: { error: { message: 'overloaded, try again' } },
      headers: { 'retry-after-ms': '10' },
    },
    {
      body: completion({
        tool_calls: [
          {
            id: 'a',
            type: 'function',
            function: {
              name: 'manage_toolsets',
              arguments: JSON.stringify({ action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }),
            },
          },
        ],
      }),
    },
    {
      body: completion({
        tool_calls: [
          {
            id: 'w',
            type: 'function',
            function: {
              name: 'write_file',
              arguments: JSON.stringify({ path: 'report.txt', content: SECRET_CONTENT }),
            },
          },
        ],
      }),
    },
    { body: completion({ content: 'Report written.' }) },
  ],
  'use a bad key': [
    {
      status: 401,
      body: {
        error: { message: 'Incorrect API key provided: sk-live-***logged.', type: 'invalid_request_error' },
      },
    },
  ],
};

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-live-'));
  await mkdir(path.join(tmp, 'workspace'));
  model = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      // The goal as the user gave it: a note of toolsets activated for it may follow.
      const goal = (JSON.parse(body) as { messages: { content: string }[] }).messages[1].content.split(
        '\n\n',
      )[0];
      const reply = scripts[goal]?.shift() ?? {
        status: 400,
        body: { error: { message: `no reply for ${goal}` } },
      };
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
  const modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`;
  stack = spawn(process.execPath, ['start/start.ts'], {
    env: {
      PATH: process.env.PATH,
      HOME: tmp,
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      OPENAI_BASE_URL: modelUrl,
      OPENAI_API_KEY: API_KEY,
      TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
      FS_ROOTS: path.join(tmp, 'workspace'),
      LOG_LEVEL: 'debug',
      LOG_FORMAT: 'json',
      // The scripted model activates what it uses itself: the counts below are of its calls.
      AGENT_PRIME_TOOLSETS: 'false',
    },
    cwd: path.resolve('.'),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stack.stderr?.on('data', (c: Buffer) => {
    raw += c;
  });
  await new Promise<void>((resolve, reject) => {
    let buffer = '';
    stack.stdout?.on('data', (c: Buffer) => {
      raw += c;
      buffer += c;
      let newline = buffer.indexOf('\n');
      while (newline !== -1) {
        const line = JSON.parse(buffer.slice(0, newline)) as LogLine;
        buffer = buffer.slice(newline + 1);
        lines.push(line);
        if (/listening$/.test(line.msg)) urls[line.name] = String(line.url);
        if (Object.keys(urls).length === 3) resolve();
        newline = buffer.indexOf('\n');
      }
    });
    stack.once('exit', (code) => reject(new Error(`the stack exited (${code}): ${raw}`)));
  });
}, 30_000);

afterAll(async () => {
  stack.kill('SIGTERM');
  await new Promise((r) => stack.once('exit', r));
  await new Promise((r) => model.close(r));
  await rm(tmp, { recursive: true, force: true });
});

/** The first log line matching `test`, waiting for the child's output to arrive (bounded, not timed). */
async function lineWhere(test: (l: LogLine) => boolean): Promise<LogLine | undefined> {
  for (let i = 0; i < 500 && !lines.some(test); i++) await new Promise((r) => setTimeout(r, 10));
  return lines.find(test);
}

async function execute(goal: string, requestId: string) {
  const res = await fetch(`${urls['agent-server']}/agent/execute_task`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-request-id': requestId,
      ...bearerOf(path.join(tmp, 'data'), 'AGENT_API_TOKEN'),
    },
    body: JSON.stringify({ goal }),
  });
  return { res, body: (await res.json()) as { status: string; task_id: string; error?: string } };
}

/** Reads the series of one service's /metrics whose line starts with `prefix`. */
async function metric(service: string, prefix: string): Promise<number | undefined> {
  // Each service's own credential, from the file npm start made in its data directory.
  const variable = (
    {
      'agent-server': 'AGENT_API_TOKEN',
      'mcp-gateway': 'GATEWAY_ADMIN_TOKEN',
      'tool-server': 'TOOL_SERVER_TOKEN',
    } as const
  )[service as 'agent-server'];
  const text = await (
    await fetch(`${urls[service]}/metrics`, { headers: bearerOf(path.join(tmp, 'data'), variable) })
  ).text();
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('the stack as npm start runs it', () => {
  it('logs the model endpoint at start, never the key', () => {
    const start = lines.find((l) => l.name === 'agent-server' && /listening$/.test(l.msg));
    expect(start).toMatchObject({
      model_base_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/v1$/),
      tokenizer: 'o200k_base',
    });
  });

  it('carries one request id through the three services, echoes it, and logs a retry with its reason', async () => {
    const { res, body } = await execute('write the report', 'req-live-0001');
    expect(body.status).toBe('completed');
    expect(res.headers.get('x-request-id')).toBe('req-live-0001');
    expect(res.headers.get('x-toolshift-service')).toBe('agent-server');
    await lineWhere((l) => l.request_id === 'req-live-0001' && l.msg === 'task ended');
    const tagged = lines.filter((l) => l.request_id === 'req-live-0001');
    expect(new Set(tagged.map((l) => l.name))).toEqual(
      new Set(['agent-server', 'mcp-gateway', 'tool-server']),
    );
    // Access lines at debug on the gateway and the tool-server, for the calls the task made.
    expect(
      tagged.some((l) => l.name === 'tool-server' && l.msg === 'request' && l.path === '/tools/write_file'),
    ).toBe(true);
    const retry = tagged.find((l) => l.msg === 'model call failed; retrying');
    expect(retry).toMatchObject({
      level: 40,
      status: 503,
      reason: expect.stringMatching(/503.*overloaded, try again/),
    });
    const toolLine = tagged.find((l) => l.msg === 'tool call' && l.tool === 'write_file');
    expect(toolLine?.arguments).toEqual({ path: 'string(10)', content: `string(${SECRET_CONTENT.length})` });
    // A request without an id gets one.
    const fresh = await fetch(`${urls['mcp-gateway']}/health`);
    expect(fresh.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('logs why a task failed, at warn', async () => {
    const { body } = await execute('use a bad key', 'req-live-0002');
    expect(body.status).toBe('failed');
    const failure = await lineWhere(
      (l) => l.request_id === 'req-live-0002' && l.msg === 'task ended: failed',
    );
    expect(failure).toMatchObject({
      level: 40,
      name: 'agent-server',
      reason: expect.stringMatching(/answered 401: .*Incorrect API key/),
    });
  });

  it('counts the task, its model calls, tool calls, activations and tokens in /metrics', async () => {
    expect(await metric('agent-server', 'toolshift_tasks_total{status="completed"}')).toBe(1);
    expect(await metric('agent-server', 'toolshift_tasks_total{status="failed"}')).toBe(1);
    expect(await metric('agent-server', 'toolshift_model_retries_total{status="503"}')).toBe(1);
    expect(await metric('agent-server', 'toolshift_model_call_duration_seconds_count')).toBe(3);
    expect(await metric('agent-server', 'toolshift_tool_definition_tokens_count')).toBe(4);
    expect(await metric('agent-server', 'toolshift_tool_definition_tokens_sum')).toBeGreaterThan(100);
    expect(await metric('agent-server', 'toolshift_task_steps_count')).toBe(2);
    expect(await metric('agent-server', 'toolshift_tool_calls_total{tool="write_file",outcome="ok"}')).toBe(
      1,
    );
    expect(
      await metric('agent-server', 'toolshift_toolset_activations_total{toolset="file_system_tools"}'),
    ).toBe(1);
    expect(await metric('agent-server', 'toolshift_tasks_running')).toBe(0);
    expect(await metric('mcp-gateway', 'toolshift_tool_calls_total{tool="write_file",outcome="ok"}')).toBe(1);
    expect(
      await metric('mcp-gateway', 'toolshift_toolset_activations_total{toolset="file_system_tools"}'),
    ).toBe(1);
    expect(await metric('mcp-gateway', 'toolshift_gateway_active_sessions')).toBe(1);
    expect(await metric('tool-server', 'toolshift_tool_calls_total{tool="write_file",outcome="ok"}')).toBe(1);
    // The gateway in the same process called it without a request (start/stack.ts links them).
    expect(
      await metric(
        'tool-server',
        'toolshift_http_requests_total{method="POST",route="/tools/:name",status="200"}',
      ),
    ).toBeUndefined();
    expect(await metric('tool-server', 'toolshift_process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('writes no key, token or argument value to any log line', () => {
    expect(lines.length).toBeGreaterThan(20);
    expect(raw).not.toContain(API_KEY);
    expect(raw).not.toContain(SECRET_CONTENT);
  });
});
