import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentServer } from '../../agent-server/server.ts';
import { type Config, loadConfig } from '../../lib/config/config.ts';
import { withCredentials } from '../../lib/config/credentials.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { createLogger } from '../../lib/telemetry/log.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { completion } from '../helpers/msw.ts';

// Issue 16, what a new user saw when the model endpoint was wrong: a task failed without saying where it had
// tried or why, /health said "ok", and a refused key read "answered 401: 401 …". Here the real services
// listen (the tool-server and the gateway once, an agent-server per endpoint) and each model endpoint is a
// real socket: refused, silent, speaking plain HTTP to an https URL, refusing the key, or answering.

let tmp: string;
let config: Config;
let tools: Listening;
let gateway: Listening;
const servers: Server[] = [];

/** An HTTP server on a free loopback port, answering with `handler`; its /v1 base URL. */
async function modelServer(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const probe = createTcpServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((r) => probe.close(() => r()));
  return port;
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'first-hour-model-'));
  await mkdir(path.join(tmp, 'ws'));
  config = withCredentials(
    loadConfig({
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
      FS_ROOTS: path.join(tmp, 'ws'),
      LOG_LEVEL: 'silent',
      // No waiting between attempts beyond one backoff: these endpoints fail the same way each time.
      AGENT_MODEL_MAX_ATTEMPTS: '2',
    }),
  );
  tools = await startToolServer(config);
  gateway = await startGateway({ ...config, tools: { ...config.tools, url: tools.url } });
});

afterAll(async () => {
  await gateway?.close();
  await tools?.close();
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  await rm(tmp, { recursive: true, force: true });
});

type Line = Record<string, unknown> & { msg: string; level: number };
/** /health's answer, read field by field. */
type Health = { status: string; model_configured?: boolean; model: { state: string; at: string } };

/** An agent-server on `baseURL` (with `apiKey`, if any), its JSON log lines collected. */
async function agentOn(baseURL: string, opts: { apiKey?: string; timeoutMs?: number } = {}) {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  const agent = await startAgentServer(
    {
      ...config,
      gateway: { ...config.gateway, url: gateway.url },
      agent: {
        ...config.agent,
        model: {
          ...config.agent.model,
          baseURL,
          apiKey: opts.apiKey,
          timeoutMs: opts.timeoutMs ?? config.agent.model.timeoutMs,
        },
      },
    },
    { log: createLogger('agent-server', 'debug', sink) },
  );
  const auth = { authorization: `Bearer ${config.agent.apiToken}` };
  return {
    lines,
    url: agent.url,
    close: () => agent.close(),
    health: async (withToken = true) =>
      (await (await fetch(`${agent.url}/health`, { headers: withToken ? auth : {} })).json()) as Health,
    run: async (goal: string) => {
      const res = await fetch(`${agent.url}/agent/execute_task`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ goal }),
      });
      return (await res.json()) as { status: string; error?: string };
    },
  };
}

describe('an unreachable or refusing model endpoint, as the user sees it', () => {
  it('names the URL and ECONNREFUSED in the task error and the log; /health turns degraded, for a token only', async () => {
    const url = `http://127.0.0.1:${await closedPort()}/v1`;
    const agent = await agentOn(url, { apiKey: 'sk-test' });
    try {
      // Before any call: configured, state unknown, nothing known to be wrong.
      expect(await agent.health()).toEqual({
        status: 'ok',
        model_configured: true,
        model: { url, provider: 'openai-chat', state: 'unknown' },
      });
      const result = await agent.run('list the files');
      expect(result.status).toBe('failed');
      expect(result.error).toMatch(
        new RegExp(
          `^Model call failed after 2 attempts: cannot reach the model endpoint ${url.replace(/\./g, '\\.')} \\(ECONNREFUSED`,
        ),
      );
      expect(result.error).toContain('is OPENAI_BASE_URL right?');
      // The log says it twice over: the retry, and the task's end, each naming the endpoint and the cause.
      const retry = agent.lines.find((l) => l.msg === 'model call failed; retrying');
      expect(retry).toMatchObject({ level: 40, reason: expect.stringContaining(`${url} (ECONNREFUSED`) });
      const ended = agent.lines.find((l) => l.msg === 'task ended: failed');
      expect(ended).toMatchObject({ level: 40, reason: result.error });
      const health = await agent.health();
      expect(health).toEqual({
        status: 'degraded',
        model_configured: true,
        model: {
          url,
          provider: 'openai-chat',
          state: 'unreachable',
          error: expect.stringContaining('ECONNREFUSED'),
          at: expect.any(String),
        },
      });
      expect(Number.isNaN(Date.parse(health.model.at))).toBe(false);
      // Without a token: only that it is up.
      expect(await agent.health(false)).toEqual({ status: 'ok' });
    } finally {
      await agent.close();
    }
  });

  it('says a call timed out, after how long, and which setting sets it', async () => {
    // Accepts the request and never answers.
    const url = await modelServer(() => {});
    const agent = await agentOn(url, { apiKey: 'sk-test', timeoutMs: 300 });
    try {
      const result = await agent.run('anything');
      expect(result.error).toBe(
        `Model call failed after 2 attempts: model call to ${url} timed out after 300 ms (AGENT_MODEL_TIMEOUT_MS)`,
      );
      expect((await agent.health()).model).toMatchObject({ url, state: 'unreachable' });
    } finally {
      await agent.close();
    }
  });

  it('names a TLS failure as one, with the hints that fix it', async () => {
    // An https:// URL to a server that speaks plain HTTP: the handshake fails.
    const plain = await modelServer((_req, res) => res.end('not TLS'));
    const url = plain.replace('http://', 'https://');
    const agent = await agentOn(url, { apiKey: 'sk-test' });
    try {
      const result = await agent.run('anything');
      expect(result.error).toMatch(
        /^Model call failed after 2 attempts: the TLS connection to the model endpoint https:\/\/127\.0\.0\.1:\d+\/v1 failed \(ERR_SSL_WRONG_VERSION_NUMBER: wrong version number\): does the server speak https \(OPENAI_BASE_URL may need http:\/\/\), and is its certificate trusted \(NODE_EXTRA_CA_CERTS\)\?$/,
      );
      expect((await agent.health()).model.state).toBe('unreachable');
    } finally {
      await agent.close();
    }
  });

  it('says a 401 once and that the key in OPENAI_API_KEY was refused; a plain-text 401 too', async () => {
    const json = await modelServer((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } }),
      );
    });
    const agent = await agentOn(json, { apiKey: 'sk-wrong' });
    try {
      const result = await agent.run('anything');
      // Not retried (a refused key stays refused), the status said once.
      expect(result.error).toBe(
        `Model call failed: model endpoint ${json} answered 401: Incorrect API key provided (the endpoint ` +
          'refused the API key in OPENAI_API_KEY: check it, and that it may use this model)',
      );
      expect(await agent.health()).toEqual({
        status: 'degraded',
        model_configured: true,
        model: {
          url: json,
          provider: 'openai-chat',
          state: 'error',
          status: 401,
          error: result.error?.replace('Model call failed: ', ''),
          at: expect.any(String),
        },
      });
    } finally {
      await agent.close();
    }
    // A proxy's plain-text answer repeats the status ("401 Unauthorized"): still said once. No key was set.
    const text = await modelServer((_req, res) => {
      res.writeHead(401, { 'content-type': 'text/plain' });
      res.end('401 Unauthorized');
    });
    const keyless = await agentOn(text);
    try {
      expect((await keyless.run('anything')).error).toBe(
        `Model call failed: model endpoint ${text} answered 401: Unauthorized (no API key was sent: set OPENAI_API_KEY)`,
      );
    } finally {
      await keyless.close();
    }
  });

  it('reports ok once the endpoint answers', async () => {
    const url = await modelServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(completion({ content: 'hello' })));
      });
    });
    const agent = await agentOn(url, { apiKey: 'sk-test' });
    try {
      expect(await agent.run('say hello')).toMatchObject({ status: 'completed' });
      expect(await agent.health()).toEqual({
        status: 'ok',
        model_configured: true,
        model: { url, provider: 'openai-chat', state: 'ok', at: expect.any(String) },
      });
    } finally {
      await agent.close();
    }
  });
});
