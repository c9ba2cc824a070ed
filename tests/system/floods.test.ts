import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../agent-server/app.ts';
import { createGatewayClient } from '../../agent-server/clients/gateway.ts';
import type { Model } from '../../agent-server/clients/model.ts';
import { createTaskStore } from '../../agent-server/store/store.ts';
import { createAgent } from '../../agent-server/tasks/agent.ts';
import { openDatabase } from '../../lib/db/sqlite.ts';
import { DEFAULT_FLOOD_LIMITS, type FloodLimits } from '../../lib/http/flood.ts';
import { installBase } from '../../lib/http/http.ts';
import { type Listening, listen } from '../../lib/http/serve.ts';
import { createGatewayApp } from '../../mcp-gateway/app.ts';
import { createPromptCatalog } from '../../mcp-gateway/catalog/prompts.ts';
import {
  fetchOf,
  log,
  makeStack,
  openSecurity,
  retain,
  SPLIT_TOOLSETS,
  type Stack,
  tokenSecurity,
} from '../helpers/stack.ts';

// Floods against a real listening service: too many connections, held-open event streams beyond a
// credential's share, and clients that trickle their headers or body (slowloris). Each is answered with a
// status that says why, and the service keeps answering everyone else.

let server: Listening | undefined;
/** How many /forever streams are running on the server side (a refused one must not keep running). */
let live = 0;
const sockets: Socket[] = [];
let stack: Stack | undefined;
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await server?.close();
  server = undefined;
  await stack?.close();
  stack = undefined;
});

function app(limits: FloodLimits, tokens = false) {
  const security = tokens
    ? tokenSecurity({ user: 'user-token-0001', admin: 'admin-token-001' })
    : openSecurity;
  const a = new Hono();
  installBase(a, log, { ...security, limits });
  a.get('/health', (c) => c.json({ status: 'ok' }));
  a.get('/forever', (c) =>
    streamSSE(c, async (stream) => {
      live++;
      try {
        await stream.writeSSE({ data: 'open' });
        while (!stream.aborted) await stream.sleep(50);
      } finally {
        live--;
      }
    }),
  );
  a.post('/echo', async (c) => c.json({ got: await c.req.text() }));
  return a;
}

const limits = (over: Partial<FloodLimits>): FloodLimits => ({ ...DEFAULT_FLOOD_LIMITS, ...over });

/** A raw TCP client: what it has received so far, and whether the server closed it. */
function rawClient(url: string) {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  sockets.push(socket);
  const state = { text: '', closed: false };
  socket.on('data', (c) => {
    state.text += c;
  });
  socket.on('close', () => {
    state.closed = true;
  });
  socket.on('error', () => {});
  const opened = new Promise<void>((r) => socket.once('connect', () => r()));
  return { socket, state, opened };
}

const until = async (test: () => boolean, ms: number) => {
  for (let waited = 0; !test() && waited < ms; waited += 20) await new Promise((r) => setTimeout(r, 20));
};

/**
 * `open()` again while it is refused for the cap (429), for at most 5 s: a slot is freed once the server has seen
 * its client leave, a moment after the client aborts.
 */
async function letInOnceFreed<T extends { status: number }>(open: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const res = await open();
    if (res.status !== 429 || Date.now() > deadline) return res;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a connection flood', () => {
  it('answers connections past MAX_CONNECTIONS with 503 and keeps serving once they go', async () => {
    server = await listen(
      app(limits({ maxConnections: 8 })),
      0,
      '127.0.0.1',
      undefined,
      limits({ maxConnections: 8 }),
    );
    const held = Array.from({ length: 8 }, () => rawClient(server!.url));
    await Promise.all(held.map((h) => h.opened));
    const extra = rawClient(server.url);
    await until(() => extra.state.closed, 5000);
    expect(extra.state.text).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(extra.state.text).toContain('Too many open connections (MAX_CONNECTIONS=8)');
    expect(extra.state.text).toMatch(/Retry-After: 1/i);
    for (const h of held) h.socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });
});

describe('slow clients', () => {
  it('cuts a client that trickles its headers (408) while others are served', async () => {
    const l = limits({ headersTimeoutMs: 1000 });
    server = await listen(app(l), 0, '127.0.0.1', undefined, l);
    const slow = rawClient(server.url);
    await slow.opened;
    slow.socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const trickle = setInterval(() => slow.socket.writable && slow.socket.write('X'), 200);
    try {
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      await until(() => slow.state.closed, 8000);
    } finally {
      clearInterval(trickle);
    }
    expect(slow.state.closed).toBe(true);
    expect(slow.state.text).toMatch(/^HTTP\/1\.1 408/);
  });

  it('cuts a connection that sends nothing at the header limit (408), so silent sockets cannot hold the cap', async () => {
    const l = limits({ headersTimeoutMs: 1000 });
    server = await listen(app(l), 0, '127.0.0.1', undefined, l);
    const silent = rawClient(server.url);
    await silent.opened;
    await until(() => silent.state.closed, 8000);
    expect(silent.state.closed).toBe(true);
    expect(silent.state.text).toMatch(/^HTTP\/1\.1 408/);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  it('cuts a client that trickles its body (408)', async () => {
    const l = limits({ headersTimeoutMs: 1000, requestTimeoutMs: 1500 });
    server = await listen(app(l), 0, '127.0.0.1', undefined, l);
    const slow = rawClient(server.url);
    await slow.opened;
    slow.socket.write(
      'POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n',
    );
    const trickle = setInterval(() => slow.socket.writable && slow.socket.write('1'), 200);
    try {
      await until(() => slow.state.closed, 8000);
    } finally {
      clearInterval(trickle);
    }
    expect(slow.state.closed).toBe(true);
    expect(slow.state.text).toMatch(/^HTTP\/1\.1 408/);
  });

  it('keeps an idle kept-alive connection past the header limit (steps of a task reuse it)', async () => {
    const l = limits({ headersTimeoutMs: 1000 });
    server = await listen(app(l), 0, '127.0.0.1', undefined, l);
    const agent = new Agent({ connections: 1, keepAliveTimeout: 60_000 });
    let connects = 0;
    agent.on('connect', () => connects++);
    const first = await request(`${server.url}/health`, { dispatcher: agent });
    await first.body.text();
    // Past the header limit: a connection opened after it, that sends nothing, has been cut for it.
    const silent = rawClient(server.url);
    await silent.opened;
    await until(() => silent.state.closed, 8000);
    expect(silent.state.text).toMatch(/^HTTP\/1\.1 408/);
    const second = await request(`${server.url}/health`, { dispatcher: agent });
    expect(second.statusCode).toBe(200);
    await second.body.text();
    expect(connects).toBe(1);
    await agent.close();
  });
});

describe('held-open event streams', () => {
  it('caps streams per credential and per service, naming the setting, and frees a slot when a client leaves', async () => {
    const l = limits({ maxStreams: 3, maxStreamsPerCredential: 2 });
    server = await listen(app(l, true), 0, '127.0.0.1', undefined, l);
    const open = (token: string) => {
      const controller = new AbortController();
      const res = fetch(`${server!.url}/forever`, {
        headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      return { res, controller };
    };
    const a1 = open('user-token-0001');
    const a2 = open('user-token-0001');
    expect((await a1.res).status).toBe(200);
    expect((await a2.res).status).toBe(200);
    const a3 = await open('user-token-0001').res;
    expect(a3.status).toBe(429);
    expect((await a3.json()).error).toBe(
      'Too many open event streams (MAX_SSE_STREAMS_PER_CREDENTIAL=2); close one or retry shortly',
    );
    // Another credential still gets one: the first client cannot lock the operator out.
    const b1 = open('admin-token-001');
    expect((await b1.res).status).toBe(200);
    const b2 = await open('admin-token-001').res;
    expect(b2.status).toBe(429);
    expect((await b2.json()).error).toMatch(/MAX_SSE_STREAMS=3/);
    // A client that goes away frees its slot.
    a1.controller.abort();
    const again = await letInOnceFreed(async () => {
      const stream = open('user-token-0001');
      return { ...stream, status: (await stream.res).status };
    });
    expect(again.status).toBe(200);
    for (const s of [a2, b1, again]) s.controller.abort();
    // Ordinary requests were never counted.
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  it('counts a stream by its answer: leaving Accept out or asking for JSON too does not get round the cap', async () => {
    const l = limits({ maxStreams: 10, maxStreamsPerCredential: 2 });
    server = await listen(app(l, true), 0, '127.0.0.1', undefined, l);
    const held: AbortController[] = [];
    const open = async (accept: string | undefined) => {
      const controller = new AbortController();
      held.push(controller);
      const headers: Record<string, string> = { authorization: 'Bearer user-token-0001' };
      if (accept) headers.accept = accept;
      return fetch(`${server!.url}/forever`, { headers, signal: controller.signal });
    };
    const first = await open(undefined);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toContain('text/event-stream');
    expect((await open('application/json, text/event-stream')).status).toBe(200);
    for (const accept of [undefined, '*/*', 'application/json, text/event-stream', 'text/event-stream']) {
      const refused = await open(accept);
      expect(refused.status, String(accept)).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect((await refused.json()).error).toBe(
        'Too many open event streams (MAX_SSE_STREAMS_PER_CREDENTIAL=2); close one or retry shortly',
      );
    }
    // The refused streams were ended on the server, not left running unseen.
    await until(() => live === 2, 3000);
    expect(live).toBe(2);
    // Another credential still gets one, and a slot comes back when its client leaves.
    const other = await fetch(`${server.url}/forever`, {
      headers: { authorization: 'Bearer admin-token-001' },
      signal: held[0].signal,
    });
    expect(other.status).toBe(200);
    held[1].abort();
    expect((await letInOnceFreed(() => open(undefined))).status).toBe(200);
    for (const c of held) c.abort();
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });
});

describe('task event streams on a listening agent-server', () => {
  it('refuses a running task’s event streams past the cap, whatever Accept says, and keeps answering', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    // A model call that never answers: the task stays running, so each event stream stays open.
    const hangs: Model = {
      complete: (_request, options = {}) =>
        new Promise((_resolve, reject) => {
          options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
        }),
    };
    const store = createTaskStore(openDatabase(path.join(stack.dataDir, 'agent-floods.db')));
    retain(store);
    const agent = createAgent({
      store,
      gateway: createGatewayClient({ baseUrl: 'http://gateway', fetch: fetchOf(stack.gatewayApp) }),
      model: hangs,
      modelName: 'test-model',
      defaultMaxSteps: 5,
      log,
    });
    const l = limits({ maxStreams: 4, maxStreamsPerCredential: 3 });
    const app = createAgentApp({ agent, store, log, security: { ...openSecurity, limits: l } });
    server = await listen(app, 0, '127.0.0.1', undefined, l);
    const started = await fetch(`${server.url}/agent/execute_task`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ goal: 'wait forever', wait: false }),
    });
    expect(started.status).toBe(202);
    const { task_id } = await started.json();
    const held: AbortController[] = [];
    const follow = (accept?: string) => {
      const controller = new AbortController();
      held.push(controller);
      return fetch(`${server!.url}/agent/tasks/${task_id}/events`, {
        headers: accept ? { accept } : {},
        signal: controller.signal,
      });
    };
    try {
      // No Accept at all (curl's default is */*): the route streams anyway, so the answer is what counts. The
      // answers are kept: undici cancels the body of a Response that is garbage-collected, which would close
      // the stream and free its slot mid-test.
      const open: Response[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await follow();
        expect(res.status).toBe(200);
        open.push(res);
      }
      for (const accept of [undefined, '*/*', 'text/event-stream']) {
        const refused = await follow(accept);
        expect(refused.status).toBe(429);
        expect((await refused.json()).error).toMatch(/MAX_SSE_STREAMS_PER_CREDENTIAL=3/);
      }
      // The service answers everything else meanwhile, and the task is still running.
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      const task = await (await fetch(`${server.url}/agent/tasks/${task_id}`)).json();
      expect(task.status).toBe('running');
      expect(open).toHaveLength(3);
      // A follower that leaves gives its slot back.
      held[0].abort();
      expect((await letInOnceFreed(() => follow())).status).toBe(200);
    } finally {
      for (const c of held) c.abort();
      await fetch(`${server.url}/agent/tasks/${task_id}/cancel`, { method: 'POST' });
    }
  }, 30_000);
});

describe('GET /mcp streams on a listening gateway', () => {
  const TOKENS = { admin: 'admin-token-0123456789', mcp: 'mcp-token-0123456789' };
  const PROTOCOL = '2025-06-18';

  it('refuses an MCP client’s standalone streams past its share; the operator still gets one, requests still run', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
    const l = limits({ maxStreams: 10, maxStreamsPerCredential: 2 });
    // The stack's gateway and MCP face behind a listening app with small stream caps.
    const app = createGatewayApp({
      gateway: stack.gateway,
      backends: {},
      log,
      security: { ...tokenSecurity(TOKENS), limits: l },
      face: stack.face,
      prompts: createPromptCatalog(path.resolve('prompts')),
    });
    server = await listen(app, 0, '127.0.0.1', undefined, l);
    const url = `${server.url}/mcp`;
    const post = (token: string, body: unknown, session?: string) =>
      fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': PROTOCOL,
          ...(session ? { 'mcp-session-id': session } : {}),
        },
        body: JSON.stringify(body),
      });
    /** A 2025-era session: initialize, then the initialized notification. */
    const session = async (token: string) => {
      const init = await post(token, {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'flood', version: '1' } },
      });
      expect(init.status).toBe(200);
      await init.text();
      const id = init.headers.get('mcp-session-id') as string;
      await (await post(token, { jsonrpc: '2.0', method: 'notifications/initialized' }, id)).text();
      return id;
    };
    const held: AbortController[] = [];
    const stream = (token: string, id: string, accept = 'text/event-stream') => {
      const controller = new AbortController();
      held.push(controller);
      return fetch(url, {
        headers: {
          authorization: `Bearer ${token}`,
          accept,
          'mcp-protocol-version': PROTOCOL,
          'mcp-session-id': id,
        },
        signal: controller.signal,
      });
    };
    try {
      const ids = [await session(TOKENS.mcp), await session(TOKENS.mcp), await session(TOKENS.mcp)];
      for (const id of ids.slice(0, 2)) {
        const open = await stream(TOKENS.mcp, id);
        expect(open.status).toBe(200);
        expect(open.headers.get('content-type')).toContain('text/event-stream');
      }
      for (const accept of ['text/event-stream', 'application/json, text/event-stream']) {
        const refused = await stream(TOKENS.mcp, ids[2], accept);
        expect(refused.status, accept).toBe(429);
        expect((await refused.json()).error).toBe(
          'Too many open event streams (MAX_SSE_STREAMS_PER_CREDENTIAL=2); close one or retry shortly',
        );
      }
      // The same client's requests still run (they are not held-open streams to refuse).
      const list = await post(TOKENS.mcp, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, ids[0]);
      expect(list.status).toBe(200);
      expect(await list.text()).toContain('manage_toolsets');
      // The operator is not locked out by the client's streams.
      const mine = await stream(TOKENS.admin, await session(TOKENS.admin));
      expect(mine.status).toBe(200);
      // A client that drops a stream gets its slot back, once the server has seen the connection close (asked
      // again until then: on a loaded machine that takes longer than any fixed wait).
      held[0].abort();
      let status = 0;
      for (const deadline = Date.now() + 15_000; status !== 200 && Date.now() < deadline; ) {
        await new Promise((r) => setTimeout(r, 100));
        const again = await stream(TOKENS.mcp, ids[2]);
        status = again.status;
        if (status !== 200) await again.body?.cancel();
      }
      expect(status).toBe(200);
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
    } finally {
      for (const c of held) c.abort();
    }
  }, 30_000);
});
