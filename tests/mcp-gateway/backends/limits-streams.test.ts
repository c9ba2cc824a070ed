import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../lib/telemetry/log.ts';
import { makeStack } from '../../helpers/stack.ts';

// More of what an untrusted upstream can send, each driven through the gateway against a real process or
// a hand-written server: the shipped memory server's 11.7 MB graph at the default cap (the review's exact
// attack), a 10 MB deeply nested tools/list after list_changed, lines that are not JSON-RPC, an SSE event
// trickled forever past the call's timeout, and events separated by bare CRs. Each test ends by showing
// the gateway still answering (the listing and a native tool) and memory bounded where bytes were sent.

type Stack = Awaited<ReturnType<typeof makeStack>>;
let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const MiB = 1024 * 1024;
const HOSTILE = path.resolve('tests/fixtures/mcp/hostile-stdio.mjs');
const FILE_TOOLS = readFileSync(path.resolve('toolsets/file_system_tools.yaml'), 'utf8');
const heapMiB = () => process.memoryUsage().heapUsed / MiB;

async function call(s: Stack, session: string, name: string, args: Record<string, unknown>) {
  const res = await s.post(s.gatewayApp, `/mcp/tools/${name}/call`, { session_id: session, arguments: args });
  expect(res.status).toBe(200);
  return res.body as { success: boolean; result: unknown; error?: string };
}

async function activate(s: Stack, session: string, ids: string[]) {
  const res = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
    action: 'ACTIVATE',
    toolset_ids: ids,
    session_id: session,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** The rest of the daemon answers: the listing and a native file tool. */
async function stillServing(s: Stack, session: string) {
  expect((await s.get(s.gatewayApp, '/mcp/admin/toolsets')).status).toBe(200);
  await activate(s, session, ['file_system_tools']);
  const listed = await call(s, session, 'list_allowed_directories', {});
  expect(listed.success).toBe(true);
}

async function until(check: () => boolean, what: string) {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check(), what).toBe(true);
}

describe('a stdio upstream at the default cap', () => {
  it("the review's attack: three 3.9 MB entities, then read_graph; that call fails, the daemon and the server go on", async () => {
    stack = await makeStack({
      toolsets: {
        'file_system_tools.yaml': FILE_TOOLS,
        'memory.yaml': `id: memory
description: A knowledge graph.
variables: [TOOLSHIFT_DATA_DIR]
backend:
  mcp:
    command: mcp-server-memory
    env:
      MEMORY_FILE_PATH: \${TOOLSHIFT_DATA_DIR}/memory.jsonl
`,
      },
    });
    await activate(stack, 'm', ['memory']);
    const observation = 'o'.repeat(3_900_000);
    for (const name of ['a', 'b', 'c']) {
      const created = await call(stack, 'm', 'create_entities', {
        entities: [{ name, entityType: 'note', observations: [observation] }],
      });
      expect(created.success, created.error).toBe(true);
    }
    // The server answers read_graph with the graph twice (text and structuredContent): one 23 MB line, which
    // the SDK's ReadBuffer threw on (past 10 MiB) inside the stdout listener, killing all three services.
    const before = heapMiB();
    for (let round = 0; round < 2; round++) {
      const read = await call(stack, 'm', 'read_graph', {});
      expect(read.success).toBe(false);
      expect(read.error).toMatch(
        /over UPSTREAM_MAX_MESSAGE_BYTES \(16 MiB\); it was dropped and the server stopped/,
      );
      expect(heapMiB() - before).toBeLessThan(128);
      await stillServing(stack, 'm');
      // Restarted on next use, the server answers what fits: no crash loop on the graph it keeps on disk.
      const found = await call(stack, 'm', 'search_nodes', { query: 'no-such-entity' });
      expect(found.success, found.error).toBe(true);
      expect(stack.gateway.upstreams()['mcp-server-memory']).toMatchObject({
        state: 'up',
        restarts: round + 1,
      });
    }
  }, 120_000);

  it('a 10 MB deeply nested tools/list after list_changed leaves the daemon answering', async () => {
    // The gateway's warnings, to see the refresh fail.
    const warnings: string[] = [];
    stack = await makeStack({
      log: createLogger('test', 'warn', {
        write: (line: string) => {
          warnings.push(line);
        },
      }),
      toolsets: {
        'file_system_tools.yaml': FILE_TOOLS,
        'hostile.yaml': `id: hostile
description: A hostile server.
backend:
  mcp:
    command: ${process.execPath}
    args: [${HOSTILE}]
    protocol: legacy
`,
      },
    });
    await activate(stack, 'n', ['hostile']);
    expect((await call(stack, 'n', 'nest', {})).result).toBe('nested');
    // The refresh the server asked for brings the nested schema (under the cap), which the SDK cannot
    // validate (its stack runs out); the refresh fails inside the SDK, the old list stays, nothing escapes.
    // A tool call after the refresh was answered shows it was handled (the server writes in order).
    await until(
      () => warnings.some((line) => line.includes('refreshing the tool list after list_changed failed')),
      'the refresh after list_changed failed and was logged',
    );
    expect((await call(stack, 'n', 'echo', { message: 'first' })).result).toBe('echo: first');
    const listed = await stack.get(stack.gatewayApp, '/mcp/tools?session_id=n');
    expect(listed.status).toBe(200);
    const names = (listed.body as { tools: { name: string }[] }).tools.map((t) => t.name);
    expect(names).toEqual(['nest', 'noise', 'echo']);
    expect(Object.values(stack.gateway.upstreams())[0]).toMatchObject({ state: 'up', restarts: 0 });
    await stillServing(stack, 'n');
    const echoed = await call(stack, 'n', 'echo', { message: 'still here' });
    expect(echoed.result, echoed.error).toBe('echo: still here');
  }, 120_000);

  it('lines that are not JSON-RPC (text, a lone brace, invalid UTF-8) are skipped; the real answer arrives', async () => {
    stack = await makeStack({
      toolsets: {
        'file_system_tools.yaml': FILE_TOOLS,
        'hostile.yaml': `id: hostile
description: A hostile server.
backend:
  mcp:
    command: ${process.execPath}
    args: [${HOSTILE}]
    protocol: legacy
`,
      },
    });
    await activate(stack, 'x', ['hostile']);
    const noisy = await call(stack, 'x', 'noise', {});
    expect(noisy.result, noisy.error).toBe('after the noise');
    expect(stack.gateway.upstreams()).toMatchObject({
      [Object.keys(stack.gateway.upstreams())[0]]: { state: 'up' },
    });
    await stillServing(stack, 'x');
  }, 60_000);
});

/**
 * A 2025-era Streamable HTTP server written by hand; `onCall` answers tools/call on the raw response.
 * It records the JSON-RPC messages it received, and whether the response of the last tools/call was closed.
 */
async function handWrittenServer(onCall: (res: ServerResponse) => void) {
  const received: { id?: number; method: string; params?: Record<string, unknown> }[] = [];
  let callClosed = false;
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    let text = '';
    for await (const chunk of req) text += chunk;
    const msg = JSON.parse(text) as (typeof received)[number];
    received.push(msg);
    const reply = (result: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
    };
    if (msg.id === undefined) res.writeHead(202).end();
    else if (msg.method === 'initialize') {
      reply({
        protocolVersion: msg.params?.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: 'hand-written', version: '1.0.0' },
      });
    } else if (msg.method === 'tools/list') {
      reply({ tools: [{ name: 'stream', description: 'Streams', inputSchema: { type: 'object' } }] });
    } else if (msg.method === 'tools/call') {
      callClosed = false;
      res.once('close', () => {
        callClosed = true;
      });
      onCall(res);
    } else reply({});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    received,
    callClosed: () => callClosed,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const httpToolset = (url: string, extra = '') => `id: remote
description: A hand-written HTTP server.
${extra}backend:
  mcp:
    url: ${url}
    protocol: legacy
`;

describe('a Streamable HTTP upstream', () => {
  it('an event trickled forever: the call times out and the gateway closes that stream when it cancels', async () => {
    let sent = 0;
    const remote = await handWrittenServer((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: message\ndata: {"jsonrpc":"2.0","id":');
      // Slow enough never to reach the cap: only the timeout can end this call.
      const timer = setInterval(() => {
        if (res.destroyed) return clearInterval(timer);
        sent += 64;
        res.write('x'.repeat(64));
      }, 20);
    });
    try {
      stack = await makeStack({
        toolsets: {
          'file_system_tools.yaml': FILE_TOOLS,
          'remote.yaml': httpToolset(remote.url, 'timeout_seconds: 1\n'),
        },
      });
      await activate(stack, 'h', ['remote']);
      const result = await call(stack, 'h', 'stream', {});
      expect(result.success).toBe(false);
      expect(result.error).toMatch(/stream did not finish within 1000 ms and was cancelled/);
      const cancelled = remote.received.find((m) => m.method === 'notifications/cancelled');
      expect(cancelled?.params?.requestId).toBe(remote.received.find((m) => m.method === 'tools/call')?.id);
      // Before, the SDK kept reading the cancelled call's stream for as long as the server kept writing.
      await until(remote.callClosed, 'the cancelled call’s response stream is closed by the gateway');
      const atClose = sent;
      expect(atClose).toBeGreaterThan(0);
      await stillServing(stack, 'h');
      // The server itself was healthy (it answered the liveness ping): it stays up.
      expect(stack.gateway.upstreams()[remote.url]).toMatchObject({ state: 'up', restarts: 0 });
    } finally {
      await remote.close();
    }
  }, 60_000);

  it('events separated by bare CRs are counted one by one, so many small events under the cap pass', async () => {
    const remote = await handWrittenServer((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const note = JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/message',
        params: { level: 'info', data: 'n'.repeat(4096) },
      });
      for (let i = 0; i < 40; i++) res.write(`event: message\rdata: ${note}\r\r`);
      const id = remote.received.filter((m) => m.method === 'tools/call').at(-1)?.id;
      res.end(
        // The last one ends in LF: at the end of a stream a trailing CR could still be half of a CRLF.
        `event: message\rdata: ${JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'done' }] } })}\n\n`,
      );
    });
    try {
      // 40 events of 4 KiB make 160 KiB in one stream: over a 64 KiB cap if the events were not told apart.
      stack = await makeStack({
        toolsets: { 'file_system_tools.yaml': FILE_TOOLS, 'remote.yaml': httpToolset(remote.url) },
        connection: { maxMessageBytes: 64 * 1024 },
      });
      await activate(stack, 'c', ['remote']);
      const result = await call(stack, 'c', 'stream', {});
      expect(result.result, result.error).toBe('done');
      await stillServing(stack, 'c');
    } finally {
      await remote.close();
    }
  }, 60_000);
});
