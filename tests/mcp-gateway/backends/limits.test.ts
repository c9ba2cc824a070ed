import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LineSplitter } from '../../../mcp-gateway/backends/message-limit.ts';
import { makeStack } from '../../helpers/stack.ts';

// An upstream MCP server is untrusted: no message it sends may crash or exhaust the daemon. Before the cap
// the SDK's ReadBuffer threw from inside the child's stdout listener past 10 MiB (the whole daemon died, and
// again after every restart that read the same graph), and an SSE event that never ended grew the process
// by ~250 MB/s. Each test drives a real server through the gateway and checks the effect: the call fails
// saying why, the process and its memory stay up, the other toolsets still answer, the upstream comes back.

type Stack = Awaited<ReturnType<typeof makeStack>>;
let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const MiB = 1024 * 1024;
const FLOOD = path.resolve('tests/fixtures/mcp/flood-server.mjs');

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

const FILE_TOOLS = readFileSync(path.resolve('toolsets/file_system_tools.yaml'), 'utf8');

const heapMiB = () => process.memoryUsage().heapUsed / MiB;

describe('a stdio upstream', () => {
  it('the shipped memory server: a graph read back over the cap fails that call; the daemon, and the server after a restart, go on', async () => {
    const memory = `id: memory
description: A knowledge graph.
variables: [TOOLSHIFT_DATA_DIR]
backend:
  mcp:
    command: mcp-server-memory
    env:
      MEMORY_FILE_PATH: \${TOOLSHIFT_DATA_DIR}/memory.jsonl
`;
    // A 2 MiB cap keeps the test quick; the same path runs at the 16 MiB default in the next test.
    stack = await makeStack({
      toolsets: { 'memory.yaml': memory, 'file_system_tools.yaml': FILE_TOOLS },
      connection: { maxMessageBytes: 2 * MiB },
    });
    await activate(stack, 'm', ['memory']);
    const observation = 'o'.repeat(800 * 1024);
    for (const name of ['a', 'b', 'c']) {
      const created = await call(stack, 'm', 'create_entities', {
        entities: [{ name, entityType: 'note', observations: [observation] }],
      });
      expect(created.success, created.error).toBe(true);
    }
    const before = heapMiB();
    const read = await call(stack, 'm', 'read_graph', {});
    expect(read.success).toBe(false);
    expect(read.error).toMatch(
      /over UPSTREAM_MAX_MESSAGE_BYTES \(2 MiB\); it was dropped and the server stopped/,
    );
    expect(heapMiB() - before).toBeLessThan(64);
    expect(stack.gateway.upstreams()).toMatchObject({
      'mcp-server-memory': { state: 'down', reason: expect.stringMatching(/UPSTREAM_MAX_MESSAGE_BYTES/) },
    });
    await stillServing(stack, 'm');
    // The next call restarts the server, which answers what fits under the cap.
    const found = await call(stack, 'm', 'search_nodes', { query: 'nothing-matches-this' });
    expect(found.success, found.error).toBe(true);
    expect(stack.gateway.upstreams()['mcp-server-memory']).toMatchObject({ state: 'up', restarts: 1 });
  }, 60_000);

  it('a result of 20 MiB at the default cap fails that call and nothing else', async () => {
    const flood = `id: flood
description: A hostile server.
backend:
  mcp:
    command: ${process.execPath}
    args: [${FLOOD}]
    env:
      FLOOD_BYTES: "${20 * MiB}"
`;
    stack = await makeStack({ toolsets: { 'flood.yaml': flood, 'file_system_tools.yaml': FILE_TOOLS } });
    await activate(stack, 'f', ['flood']);
    const before = heapMiB();
    const result = await call(stack, 'f', 'flood', {});
    expect(result.success).toBe(false);
    expect(result.error).toMatch(/over UPSTREAM_MAX_MESSAGE_BYTES \(16 MiB\)/);
    // At most the cap is ever held, never the whole 20 MiB line.
    expect(heapMiB() - before).toBeLessThan(80);
    await stillServing(stack, 'f');
    expect((await call(stack, 'f', 'echo', { message: 'back' })).result).toBe('echo: back');
  }, 60_000);

  it('a tools/list after list_changed over the cap marks the server down with the reason; the daemon answers', async () => {
    const flood = `id: flood
description: A hostile server.
backend:
  mcp:
    command: ${process.execPath}
    args: [${FLOOD}]
    env:
      FLOOD_BYTES: "${3 * MiB}"
`;
    stack = await makeStack({
      toolsets: { 'flood.yaml': flood, 'file_system_tools.yaml': FILE_TOOLS },
      connection: { maxMessageBytes: 2 * MiB },
    });
    await activate(stack, 'g', ['flood']);
    expect((await call(stack, 'g', 'grow', {})).result).toBe('grown');
    // The refresh the server asked for brings its 3 MiB listing: dropped, the server stopped.
    for (let i = 0; i < 500 && Object.values(stack.gateway.upstreams())[0]?.state === 'up'; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(Object.values(stack.gateway.upstreams())[0]).toMatchObject({
      state: 'down',
      reason: expect.stringMatching(/UPSTREAM_MAX_MESSAGE_BYTES \(2 MiB\)/),
    });
    await stillServing(stack, 'g');
  }, 60_000);
});

/** A 2025-era Streamable HTTP server written by hand: tools/call answers with one SSE event that never ends. */
async function endlessEventServer() {
  let sent = 0;
  const body = async (req: IncomingMessage) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    return JSON.parse(text) as { id?: number; method: string; params?: { protocolVersion?: string } };
  };
  const server: Server = createServer(async (req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const msg = await body(req);
    const reply = (result: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
    };
    if (msg.id === undefined) res.writeHead(202).end();
    else if (msg.method === 'initialize') {
      reply({
        protocolVersion: msg.params?.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: 'endless', version: '1.0.0' },
      });
    } else if (msg.method === 'tools/list') {
      reply({ tools: [{ name: 'stream', description: 'Streams forever', inputSchema: { type: 'object' } }] });
    } else if (msg.method === 'tools/call') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: message\ndata: {"jsonrpc":"2.0","id":');
      const chunk = 'x'.repeat(256 * 1024);
      const pump = () => {
        if (res.destroyed) return;
        sent += chunk.length;
        if (res.write(chunk)) setImmediate(pump);
        else res.once('drain', pump);
      };
      pump();
    } else reply({});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    sent: () => sent,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('a Streamable HTTP upstream', () => {
  it('an SSE event that never ends is cut at the cap, the call fails saying so, memory stays bounded', async () => {
    const endless = await endlessEventServer();
    try {
      stack = await makeStack({
        toolsets: {
          'file_system_tools.yaml': FILE_TOOLS,
          'endless.yaml': `id: endless
description: A hostile HTTP server.
backend:
  mcp:
    url: ${endless.url}
    protocol: legacy
`,
        },
        connection: { maxMessageBytes: 4 * MiB },
      });
      await activate(stack, 'h', ['endless']);
      const before = heapMiB();
      const result = await call(stack, 'h', 'stream', {});
      expect(result.success).toBe(false);
      expect(result.error).toMatch(/an event over UPSTREAM_MAX_MESSAGE_BYTES \(4 MiB\)/);
      expect(endless.sent()).toBeGreaterThan(4 * MiB);
      expect(heapMiB() - before).toBeLessThan(64);
      await stillServing(stack, 'h');
    } finally {
      await endless.close();
    }
  }, 60_000);
});

describe('what the model receives from an upstream', () => {
  it('is cut at UPSTREAM_MAX_RESULT_BYTES with a marker, as native tools cut their output', async () => {
    const flood = `id: flood
description: A server with a big answer.
backend:
  mcp:
    command: ${process.execPath}
    args: [${FLOOD}]
    env:
      FLOOD_BYTES: "${600 * 1024}"
`;
    stack = await makeStack({
      toolsets: { 'flood.yaml': flood, 'file_system_tools.yaml': FILE_TOOLS },
      connection: { maxResultBytes: 64 * 1024 },
    });
    await activate(stack, 'r', ['flood']);
    const result = await call(stack, 'r', 'flood', {});
    expect(result.success).toBe(true);
    const text = result.result as string;
    expect(text.startsWith('x'.repeat(64 * 1024))).toBe(true);
    expect(text.slice(64 * 1024)).toBe(
      "\n[truncated: the server's result was 614,400 bytes; the first 65,536 are shown (UPSTREAM_MAX_RESULT_BYTES)]",
    );
  }, 60_000);
});

describe('the line splitter', () => {
  it('joins lines across chunks and refuses one over the cap without holding more than the cap', () => {
    const lines = new LineSplitter(16);
    expect(lines.push(Buffer.from('{"a":1}\n{"b"'))).toEqual(['{"a":1}']);
    expect(lines.push(Buffer.from(':2}\r\n\n'))).toEqual(['{"b":2}']);
    expect(() => lines.push(Buffer.from('y'.repeat(17)))).toThrow(
      /over UPSTREAM_MAX_MESSAGE_BYTES \(16 bytes\)/,
    );
    // After an overflow the next line starts clean.
    expect(lines.push(Buffer.from('{"c":3}\n'))).toEqual(['{"c":3}']);
  });
});
