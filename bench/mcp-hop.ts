import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import path from 'node:path';
import { serve } from '@hono/node-server';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Server, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { startBenchStack } from './stack.ts';
import { percentile } from './timing.ts';

// Figure 16: the MCP face's hop. One `tools/call` of the reference "everything" server's `echo`, by an SDK
// client, three ways in the same run, interleaved: straight to the server over stdio; through mcp-proxy (a
// TypeScript MCP proxy that serves a stdio server over Streamable HTTP, installed as a dev dependency); and
// through toolshift's MCP face (a fixed view of the toolset, `/mcp/toolsets/mcp_reference`: the gateway's
// checks, audit and routing to the same server over stdio). The medians of each, and the ratios. A fourth way
// measures the floor of any Streamable HTTP hop: the same client calling an SDK server in this process that
// answers `echo` itself (stateless, one JSON body, nothing behind it) — what an MCP call over HTTP costs the
// SDK's client and server before a proxy does anything. A fifth is the thinnest proxy that can be written: a
// plain HTTP server in this process relaying each JSON-RPC request, under an id of its own, to its own copy of
// the same stdio server and its answer back (no SDK on the server side, no checks, no records) — a lower bound
// for any proxy measured by this client (it runs in the client's process, which if anything favours it).

/** Medians of the five ways, in ms. */
export interface McpHopRun {
  direct: number;
  proxy: number;
  toolshift: number;
  /** An SDK client to an SDK server answering by itself over Streamable HTTP: no proxying at all. */
  floor: number;
  /** The same client through a hand-written relay to the stdio server: the least any proxy can cost. */
  thinnest: number;
  rounds: number;
}

const EVERYTHING = path.resolve('node_modules/.bin/mcp-server-everything');
const MCP_PROXY = path.resolve('node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs');

/** A free port on loopback. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

/** An SDK server answering `echo` itself over Streamable HTTP on loopback: a fresh server per request, JSON. */
async function startFloorServer(): Promise<{ url: string; close(): void }> {
  const build = () => {
    const server = new Server({ name: 'bench-floor', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler('tools/list', async () => ({
      tools: [{ name: 'echo', inputSchema: { type: 'object', properties: { message: { type: 'string' } } } }],
    }));
    server.setRequestHandler('tools/call', async (request) => ({
      content: [{ type: 'text', text: `Echo: ${String(request.params.arguments?.message)}` }],
    }));
    return server;
  };
  const http = serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async (request: Request) => {
      const server = build();
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      await server.connect(transport);
      try {
        return await transport.handleRequest(request);
      } finally {
        void transport.close();
        void server.close();
      }
    },
  });
  await new Promise<void>((resolve) => (http.listening ? resolve() : http.once('listening', resolve)));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, close: () => http.close() };
}

/**
 * The thinnest proxy: each POSTed JSON-RPC request goes to the stdio server as one line under an id of the
 * relay's own and its answer comes back as one JSON body; notifications are accepted and dropped, the
 * client's `initialize` is answered with the server's own. Nothing is checked or recorded.
 */
async function startThinnestProxy(): Promise<{ url: string; close(): void }> {
  const child = spawn(EVERYTHING, ['stdio'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const waiting = new Map<
    number,
    { resolve(answer: Record<string, unknown>): void; reject(e: Error): void }
  >();
  const failAll = (err: Error) => {
    for (const w of waiting.values()) w.reject(err);
    waiting.clear();
  };
  child.on('error', failAll);
  child.on('exit', (code) => failAll(new Error(`the relay's server exited (${code})`)));
  let buffered = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
      const answer = JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>;
      buffered = buffered.slice(nl + 1);
      if (answer.method !== undefined) continue; // the server's own requests and notifications: none expected
      const settle = waiting.get(answer.id as number);
      waiting.delete(answer.id as number);
      settle?.resolve(answer);
    }
  });
  let next = 0;
  const ask = (message: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const id = ++next;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the relay's server did not answer ${String(message.method)} within 10 s`));
      }, 10_000);
      waiting.set(id, {
        resolve: (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      child.stdin.write(`${JSON.stringify({ ...message, id })}\n`);
    });
  const initialized = await ask({
    jsonrpc: '2.0',
    method: 'initialize',
    params: {
      protocolVersion: '2025-11-25',
      capabilities: {},
      clientInfo: { name: 'thinnest', version: '1' },
    },
  }).catch((err: Error) => {
    child.kill('SIGTERM');
    throw err;
  });
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  const http = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      try {
        const message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
        if (message.id === undefined) return void res.writeHead(202).end();
        const answer = message.method === 'initialize' ? initialized : await ask(message);
        const body = JSON.stringify({ ...answer, id: message.id });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      } catch (err) {
        res.writeHead(500, { 'content-type': 'text/plain' }).end((err as Error).message);
      }
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: () => {
      http.closeAllConnections();
      http.close();
      child.kill('SIGTERM');
    },
  };
}

/** Connects a client over Streamable HTTP, retrying while the server comes up. */
async function connectHttp(url: string, limitMs = 30_000): Promise<Client> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const client = new Client({ name: 'bench-mcp-hop', version: '1.0.0' });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      return client;
    } catch (err) {
      await client.close().catch(() => {});
      if (Date.now() > deadline) throw new Error(`${url} did not come up: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Runs figure 16 in `dir`; `rounds` calls each way after a warm-up. */
export async function mcpHopRun(dir: string, rounds = 300): Promise<McpHopRun> {
  const toolsetsDir = path.join(dir, 'toolsets');
  await mkdir(toolsetsDir, { recursive: true });
  await writeFile(
    path.join(toolsetsDir, 'mcp_reference.yaml'),
    `id: mcp_reference
description: The MCP reference test server.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`,
  );
  const stack = await startBenchStack({
    dir,
    modelUrl: 'http://127.0.0.1:9/v1',
    toolsetsDir,
    workspace: path.join(dir, 'ws'),
  });
  const port = await freePort();
  let proxy: ChildProcess | undefined;
  const floorServer = await startFloorServer();
  let thinnestProxy: { url: string; close(): void } | undefined;
  const clients: Client[] = [];
  try {
    thinnestProxy = await startThinnestProxy();
    proxy = spawn(
      process.execPath,
      [
        MCP_PROXY,
        '--port',
        String(port),
        '--host',
        '127.0.0.1',
        '--server',
        'stream',
        '--',
        EVERYTHING,
        'stdio',
      ],
      { stdio: ['ignore', 'ignore', 'ignore'] },
    );
    const direct = new Client({ name: 'bench-mcp-hop', version: '1.0.0' });
    await direct.connect(
      new StdioClientTransport({ command: EVERYTHING, args: ['stdio'], stderr: 'ignore' }),
    );
    clients.push(direct);
    const viaProxy = await connectHttp(`http://127.0.0.1:${port}/mcp`);
    clients.push(viaProxy);
    const viaToolshift = await connectHttp(`${stack.gatewayUrl}/mcp/toolsets/mcp_reference`);
    clients.push(viaToolshift);
    const floor = await connectHttp(floorServer.url);
    clients.push(floor);
    const thinnest = await connectHttp(thinnestProxy.url);
    clients.push(thinnest);
    const echo = (client: Client) => async () => {
      const started = performance.now();
      const result = await client.callTool({ name: 'echo', arguments: { message: 'ping' } });
      const took = performance.now() - started;
      if (result.isError) throw new Error(`echo failed: ${JSON.stringify(result.content).slice(0, 300)}`);
      return took;
    };
    const ways = {
      direct: echo(direct),
      proxy: echo(viaProxy),
      toolshift: echo(viaToolshift),
      floor: echo(floor),
      thinnest: echo(thinnest),
    };
    const times: Record<keyof typeof ways, number[]> = {
      direct: [],
      proxy: [],
      toolshift: [],
      floor: [],
      thinnest: [],
    };
    // A long warm-up (the toolshift view starts its own copy of the server on the first call, and a few hundred
    // calls pass before the optimising compiler has the hot paths of each), then interleaved.
    for (let i = 0; i < 300; i++) for (const run of Object.values(ways)) await run();
    for (let i = 0; i < rounds; i++) {
      for (const [name, run] of Object.entries(ways) as [keyof typeof ways, () => Promise<number>][]) {
        times[name].push(await run());
      }
    }
    const p50 = (xs: number[]) => percentile(xs, 0.5);
    return {
      direct: p50(times.direct),
      proxy: p50(times.proxy),
      toolshift: p50(times.toolshift),
      floor: p50(times.floor),
      thinnest: p50(times.thinnest),
      rounds,
    };
  } finally {
    for (const c of clients) await c.close().catch(() => {});
    proxy?.kill('SIGTERM');
    floorServer.close();
    thinnestProxy?.close();
    await stack.close();
  }
}
