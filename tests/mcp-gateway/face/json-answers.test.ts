import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Protocol } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readSse } from '../../helpers/sse.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// How the face answers: one JSON body per call on every leg where the client accepts it (the legacy sessions'
// GET stream stays SSE, for list_changed), and a fixed view's 2025-era calls served by one long-lived server, so
// no server is built or closed per call — with every check and record of the gateway still made.

let stack: Stack | undefined;
const clients: Client[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  await stack?.close();
  stack = undefined;
});

const BOTH = 'application/json, text/event-stream';

/** A raw MCP POST to the stack's gateway. */
function post(s: Stack, url: string, body: unknown, headers: Record<string, string> = {}) {
  return s.gatewayApp.request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: BOTH, ...headers },
    body: JSON.stringify(body),
  });
}

const call = (id: number | string, name: string, args: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});

type RpcAnswer = { id: number | string; result?: { isError?: boolean; content: { text: string }[] } };

describe('a legacy session (2025-11-25) on /mcp', () => {
  async function open(s: Stack) {
    const init = await post(s, '/mcp', {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    expect(init.status).toBe(200);
    const sid = init.headers.get('mcp-session-id') as string;
    const headers = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    expect(
      (await post(s, '/mcp', { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status,
    ).toBe(202);
    return headers;
  }

  it('answers a tool call as one JSON body, and tells list_changed on its GET stream, which stays SSE', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, autoActivate: false });
    const s = stack;
    const headers = await open(s);
    const stream = await s.gatewayApp.request('/mcp', {
      headers: { ...headers, accept: 'text/event-stream' },
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = readSse(stream);

    const activated = await post(
      s,
      '/mcp',
      call(1, 'manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }),
      headers,
    );
    expect(activated.status).toBe(200);
    expect(activated.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await activated.json()) as RpcAnswer).result?.isError).toBeFalsy();
    expect(JSON.parse((await events.next())?.data ?? '{}').method).toBe('notifications/tools/list_changed');

    const written = await post(
      s,
      '/mcp',
      call('w', 'write_file', { path: 'legacy.txt', content: 'json' }),
      headers,
    );
    expect(written.headers.get('content-type')).toMatch(/^application\/json/);
    const answer = (await written.json()) as RpcAnswer;
    expect(answer.id).toBe('w');
    expect(answer.result?.isError).toBeFalsy();
    expect(await readFile(path.join(s.root, 'legacy.txt'), 'utf8')).toBe('json');
    await events.cancel();
  });

  it('refuses a POST that accepts only a stream, as the 2025 transport requires both', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const headers = await open(stack);
    const res = await post(
      stack,
      '/mcp',
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      {
        ...headers,
        accept: 'text/event-stream',
      },
    );
    expect(res.status).toBe(406);
    expect(await res.text()).toMatch(/must accept both application\/json and text\/event-stream/);
  });
});

describe('the modern leg (2026-07-28)', () => {
  it('answers a tool call as one JSON body, and closes its server without capturing a stack', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    let contentType: string | null = null;
    const client = new Client(
      { name: 'modern', version: '1' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    clients.push(client);
    await client.connect(
      new StreamableHTTPClientTransport(new URL('http://127.0.0.1/mcp'), {
        fetch: async (url, init) => {
          const res = await s.gatewayApp.request(String(url), init);
          if (String(init?.body ?? '').includes('"tools/call"'))
            contentType = res.headers.get('content-type');
          return res;
        },
      }),
    );
    // Each exchange closes its server: the SDK's teardown then captures no stack for its "Connection closed".
    const proto = Protocol.prototype as unknown as { _onclose(): void };
    const teardown = proto._onclose;
    const stackFrames: number[] = [];
    vi.spyOn(proto, '_onclose').mockImplementation(function (this: unknown) {
      stackFrames.push(Error.stackTraceLimit);
      teardown.call(this);
    });
    const listed = await client.callTool({ name: 'manage_toolsets', arguments: { action: 'LIST' } });
    expect(listed.isError).toBeFalsy();
    expect(contentType).toMatch(/^application\/json/);
    await expect.poll(() => stackFrames.length).toBeGreaterThan(0);
    expect(stackFrames.every((n) => n === 0)).toBe(true);
    expect(Error.stackTraceLimit).toBeGreaterThan(0);
  });
});

describe('a fixed view, 2025 era', () => {
  const viewHeaders = { 'mcp-protocol-version': '2025-11-25' };

  it('answers calls as JSON from one server: none is closed per call, and each call is still checked and audited', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    // Warm the view (its first request builds its servers).
    expect(
      (await post(s, '/mcp/toolsets/fs_write', { jsonrpc: '2.0', id: 0, method: 'tools/list' }, viewHeaders))
        .status,
    ).toBe(200);
    const closes = vi.spyOn(Protocol.prototype as unknown as { _onclose(): void }, '_onclose');

    // Two clients' calls at once under the same id: each gets its own answer under its own id.
    const [a, b] = await Promise.all(
      ['a', 'b'].map((who) =>
        post(
          s,
          '/mcp/toolsets/fs_write',
          call(1, 'write_file', { path: `${who}.txt`, content: who }),
          viewHeaders,
        ),
      ),
    );
    for (const res of [a, b]) {
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    }
    const answers = [(await a.json()) as RpcAnswer, (await b.json()) as RpcAnswer];
    expect(answers.map((x) => x.id)).toEqual([1, 1]);
    expect(answers.map((x) => x.result?.isError ?? false)).toEqual([false, false]);
    expect(await readFile(path.join(s.root, 'a.txt'), 'utf8')).toBe('a');
    expect(await readFile(path.join(s.root, 'b.txt'), 'utf8')).toBe('b');

    // Outside the view: refused as before.
    const outside = (await (
      await post(s, '/mcp/toolsets/fs_write', call(2, 'read_text_file', { path: 'a.txt' }), viewHeaders)
    ).json()) as RpcAnswer;
    expect(outside.result?.isError).toBe(true);
    expect(outside.result?.content[0]?.text).toMatch(/Unknown tool read_text_file in this view of fs_write/);
    // Invalid arguments: the gateway's validation, audited.
    const invalid = (await (
      await post(s, '/mcp/toolsets/fs_write', call(3, 'write_file', { path: 7 }), viewHeaders)
    ).json()) as RpcAnswer;
    expect(invalid.result?.isError).toBe(true);
    expect(invalid.result?.content[0]?.text).toMatch(/Invalid arguments for write_file/);

    expect(closes).not.toHaveBeenCalled();
    await s.flushWrites();
    const { audit } = await s.gateway.listAudit({ session_id: 'view:fs_write', limit: 50 });
    const calls = audit.filter((r) => r.kind === 'call').map((r) => [r.subject, r.ok]);
    expect(calls).toEqual(
      expect.arrayContaining([
        ['write_file', true],
        ['write_file', true],
        ['write_file', false],
      ]),
    );
  });

  it('still answers initialize, notifications, batches and a malformed message as the SDK does', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    const init = await post(s, '/mcp/toolsets/fs_read', {
      jsonrpc: '2.0',
      id: 'i',
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    expect(init.status).toBe(200);
    const initialized = (await init.json()) as { id: string; result: { serverInfo: { name: string } } };
    expect(initialized.id).toBe('i');
    expect(initialized.result.serverInfo.name).toBe('toolshift');
    const note = await post(
      s,
      '/mcp/toolsets/fs_read',
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      viewHeaders,
    );
    expect(note.status).toBe(202);
    const batch = await post(
      s,
      '/mcp/toolsets/fs_read',
      [
        { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        { jsonrpc: '2.0', id: 2, method: 'ping' },
      ],
      viewHeaders,
    );
    expect(batch.status).toBe(200);
    expect(((await batch.json()) as { id: number }[]).map((m) => m.id).sort()).toEqual([1, 2]);
    const streamOnly = await post(
      s,
      '/mcp/toolsets/fs_read',
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      {
        ...viewHeaders,
        accept: 'text/event-stream',
      },
    );
    expect(streamOnly.status).toBe(406);
    const badVersion = await post(
      s,
      '/mcp/toolsets/fs_read',
      { jsonrpc: '2.0', id: 4, method: 'tools/list' },
      {
        'mcp-protocol-version': '1999-01-01',
      },
    );
    expect(badVersion.status).toBe(400);
    expect(await badVersion.text()).toMatch(/Unsupported protocol version: 1999-01-01/);
    const unknown = (await (
      await post(s, '/mcp/toolsets/fs_read', { jsonrpc: '2.0', id: 5, method: 'no/such' }, viewHeaders)
    ).json()) as { id: number; error: { code: number } };
    expect(unknown).toMatchObject({ id: 5, error: { code: -32601 } });
  });
});
