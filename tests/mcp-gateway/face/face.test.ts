import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

let stack: Stack | undefined;
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  await stack?.close();
  stack = undefined;
});

type Era = 'modern' | 'legacy';

/** An SDK v2 client of the stack's gateway, pinned to one era, over Streamable HTTP served in-process. */
async function connect(s: Stack, era: Era, opts: { path?: string; token?: string } = {}) {
  const client = new Client(
    { name: 'test-client', version: '1.0.0' },
    era === 'modern'
      ? { versionNegotiation: { mode: { pin: '2026-07-28' } } }
      : { supportedProtocolVersions: ['2025-11-25'] },
  );
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1${opts.path ?? '/mcp'}`), {
    fetch: async (url, init) => s.gatewayApp.request(String(url), init),
    requestInit: opts.token ? { headers: { authorization: `Bearer ${opts.token}` } } : undefined,
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

const text = (r: { content?: unknown }) =>
  ((r.content as { type: string; text: string }[])[0] ?? { text: '' }).text;
const json = (r: { content?: unknown }) => JSON.parse(text(r));

describe('the MCP face, modern leg (2026-07-28)', () => {
  it('keeps tools/list fixed while a handle activates, calls and deactivates through call_tool (AUTO_ACTIVATE=false)', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, autoActivate: false });
    const client = await connect(stack, 'modern');
    expect(client.getProtocolEra()).toBe('modern');
    const before = await client.listTools();
    expect(before.tools.map((t) => t.name)).toEqual(['manage_toolsets', 'call_tool']);

    const activated = await client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
    });
    expect(activated.isError).toBeFalsy();
    const body = json(activated);
    expect(body.session).toMatch(/^mcp_[A-Za-z0-9_-]{22}$/);
    expect(body.active_toolsets).toEqual(['fs_write']);
    expect(body.tools.map((t: { name: string }) => t.name)).toEqual([
      'write_file',
      'edit_file',
      'delete_file',
    ]);
    expect(body.tools[0].inputSchema.required).toEqual(['path', 'content']);

    const written = await client.callTool({
      name: 'call_tool',
      arguments: {
        session: body.session,
        name: 'write_file',
        arguments: { path: 'mcp.txt', content: 'via MCP' },
      },
    });
    expect(written.isError).toBeFalsy();
    expect(written.structuredContent).toMatchObject({ action: 'created' });
    expect(await readFile(path.join(stack.root, 'mcp.txt'), 'utf8')).toBe('via MCP');

    // An inactive tool is refused, and nothing is read.
    const refused = await client.callTool({
      name: 'call_tool',
      arguments: { session: body.session, name: 'read_text_file', arguments: { path: 'mcp.txt' } },
    });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(/not active in this session; activate fs_read first/);

    const after = await client.listTools();
    expect(JSON.stringify(after.tools)).toBe(JSON.stringify(before.tools));

    const deactivated = json(
      await client.callTool({
        name: 'manage_toolsets',
        arguments: { action: 'DEACTIVATE', toolset_ids: ['fs_write'], session: body.session },
      }),
    );
    expect(deactivated.tools).toEqual([]);
    const gone = await client.callTool({
      name: 'call_tool',
      arguments: {
        session: body.session,
        name: 'write_file',
        arguments: { path: 'again.txt', content: 'x' },
      },
    });
    expect(gone.isError).toBe(true);
    expect(existsSync(path.join(stack.root, 'again.txt'))).toBe(false);
  });

  it('keeps two clients apart, and refuses an unknown, expired or foreign handle', async () => {
    let clock = 1_000_000;
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      autoActivate: false,
      tokens: { admin: 'admin-tok-1', mcp: 'mcp-tok-2' },
      handleIdleMs: 60_000,
      now: () => clock,
    });
    const a = await connect(stack, 'modern', { token: 'mcp-tok-2' });
    const b = await connect(stack, 'modern', { token: 'admin-tok-1' });
    const ha = json(
      await a.callTool({
        name: 'manage_toolsets',
        arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
      }),
    );
    const hb = json(
      await b.callTool({
        name: 'manage_toolsets',
        arguments: { action: 'ACTIVATE', toolset_ids: ['fs_read'] },
      }),
    );
    expect(ha.session).not.toBe(hb.session);
    expect(hb.tools.map((t: { name: string }) => t.name)).toEqual([
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    // B cannot use A's handle (bound to A's credential), nor call A's tools with its own.
    const stolen = await b.callTool({
      name: 'call_tool',
      arguments: { session: ha.session, name: 'write_file', arguments: { path: 'stolen.txt', content: 'x' } },
    });
    expect(stolen.isError).toBe(true);
    expect(text(stolen)).toMatch(/Unknown session handle .* for this credential/);
    const own = await b.callTool({
      name: 'call_tool',
      arguments: { session: hb.session, name: 'write_file', arguments: { path: 'stolen.txt', content: 'x' } },
    });
    expect(own.isError).toBe(true);
    expect(existsSync(path.join(stack.root, 'stolen.txt'))).toBe(false);

    const unknown = await a.callTool({
      name: 'call_tool',
      arguments: { session: 'mcp_AAAAAAAAAAAAAAAAAAAAAA', name: 'write_file', arguments: {} },
    });
    expect(text(unknown)).toMatch(/^Unknown session handle/);
    clock += 61_000;
    const expired = await a.callTool({
      name: 'call_tool',
      arguments: { session: ha.session, name: 'write_file', arguments: { path: 'late.txt', content: 'x' } },
    });
    expect(expired.isError).toBe(true);
    expect(text(expired)).toMatch(/^The session handle expired after 1 minute without use/);
    expect(existsSync(path.join(stack.root, 'late.txt'))).toBe(false);
    const description = (await a.listTools()).tools[0].description ?? '';
    expect(description).toMatch(/A handle expires after 1 minute without use/);
  });

  it('serves the catalog as a resource', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const client = await connect(stack, 'modern');
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).toEqual(['toolshift://toolsets']);
    const read = await client.readResource({ uri: 'toolshift://toolsets' });
    const catalog = JSON.parse((read.contents[0] as { text: string }).text);
    expect(catalog.toolsets.map((t: { id: string }) => t.id)).toEqual(['fs_read', 'fs_write']);
  });
});

describe('the MCP face, legacy leg (2025-11-25)', () => {
  it('gives each session its own tools and tells it when they change', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = await connect(stack, 'legacy');
    const b = await connect(stack, 'legacy');
    expect(a.getProtocolEra()).toBe('legacy');
    let changes = 0;
    a.setNotificationHandler('notifications/tools/list_changed', () => {
      changes++;
    });
    expect((await a.listTools()).tools.map((t) => t.name)).toEqual(['manage_toolsets', 'call_tool']);
    const res = await a.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
    });
    expect(json(res).added_tools).toEqual(['write_file', 'edit_file', 'delete_file']);
    await expect.poll(() => changes).toBe(1);
    expect((await a.listTools()).tools.map((t) => t.name)).toEqual([
      'manage_toolsets',
      'call_tool',
      'write_file',
      'edit_file',
      'delete_file',
    ]);
    // Directly, as a client that refreshed on list_changed would, and through call_tool.
    await a.callTool({ name: 'write_file', arguments: { path: 'one.txt', content: '1' } });
    await a.callTool({
      name: 'call_tool',
      arguments: { name: 'write_file', arguments: { path: 'two.txt', content: '2' } },
    });
    expect(await readFile(path.join(stack.root, 'one.txt'), 'utf8')).toBe('1');
    expect(await readFile(path.join(stack.root, 'two.txt'), 'utf8')).toBe('2');
    // B never sees A's tools and cannot call them.
    expect((await b.listTools()).tools.map((t) => t.name)).toEqual(['manage_toolsets', 'call_tool']);
    const refused = await b.callTool({ name: 'write_file', arguments: { path: 'b.txt', content: 'b' } });
    expect(refused.isError).toBe(true);
    expect(existsSync(path.join(stack.root, 'b.txt'))).toBe(false);
    await a.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'DEACTIVATE', toolset_ids: ['fs_write'] },
    });
    await expect.poll(() => changes).toBe(2);
    expect((await a.listTools()).tools).toHaveLength(2);
  });

  it('answers an unknown session with 404 and a request without one with 400', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const post = (headers: Record<string, string>) =>
      stack?.gatewayApp.request('/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
    expect((await post({ 'mcp-session-id': 'mcp_nope', 'mcp-protocol-version': '2025-11-25' }))?.status).toBe(
      404,
    );
    expect((await post({}))?.status).toBe(400);
  });
});

describe('fixed views', () => {
  it('serves exactly the named toolsets’ tools, in both eras, with enforcement', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    for (const era of ['modern', 'legacy'] as const) {
      const client = await connect(stack, era, { path: '/mcp/toolsets/fs_write' });
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual([
        'write_file',
        'edit_file',
        'delete_file',
      ]);
      const ok = await client.callTool({
        name: 'write_file',
        arguments: { path: `${era}.txt`, content: era },
      });
      expect(ok.isError).toBeFalsy();
      const outside = await client.callTool({ name: 'read_text_file', arguments: { path: `${era}.txt` } });
      expect(outside.isError).toBe(true);
    }
    expect(await readFile(path.join(stack.root, 'modern.txt'), 'utf8')).toBe('modern');
    const unknown = await stack.gatewayApp.request('/mcp/toolsets/fs_write,nope', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toMatch(/Unknown toolset\(s\) in the view: nope; valid: .*fs_write/);
  });

  it('answers a 2025-era call to a view with one JSON body, not a stream', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const res = await stack.gatewayApp.request('/mcp/toolsets/fs_read', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as { id: number; result: { tools: { name: string }[] } };
    expect(body.id).toBe(7);
    expect(body.result.tools.map((t) => t.name)).toContain('read_text_file');
  });
});

describe('bounds', () => {
  it('keeps a view to its own toolsets even when its session has others active', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const client = await connect(stack, 'legacy', { path: '/mcp/toolsets/fs_write' });
    await client.listTools();
    // fs_read active in the view's gateway session all the same (no REST route may name a view's session, so
    // through the gateway's core, as a bug or a later door might).
    await stack.gateway.changeToolsets({
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'view:fs_write',
    });
    expect((await stack.gatewayStore.load('view:fs_write')).toolsets).toContain('fs_read');
    await stack.post(stack.toolApp, '/tools/write_file', { path: 'secret.txt', content: 'not for the view' });
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual([
      'write_file',
      'edit_file',
      'delete_file',
    ]);
    const read = await client.callTool({ name: 'read_text_file', arguments: { path: 'secret.txt' } });
    expect(read.isError).toBe(true);
    expect(text(read)).toBe('Unknown tool read_text_file in this view of fs_write');
  });

  it('caps open legacy sessions, closing the least recently used idle one to admit a new one', async () => {
    let clock = 5_000_000;
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, mcpMaxSessions: 2, now: () => clock });
    const first = await connect(stack, 'legacy');
    await connect(stack, 'legacy');
    await expect(connect(stack, 'legacy')).rejects.toThrow(/503|Too many open MCP sessions/);
    clock += 61_000;
    const third = await connect(stack, 'legacy');
    expect((await third.listTools()).tools).toHaveLength(2);
    // The first, least recently used, was closed.
    await expect(first.listTools()).rejects.toThrow();
    expect(stack.face.legacySessions()).toBe(2);
  });

  it('caps sessions per credential: a client holding all of its own does not lock out the operator', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      mcpMaxSessions: 2,
      tokens: { admin: 'admin-token-123456', mcp: 'mcp-token-1234567' },
    });
    await connect(stack, 'legacy', { token: 'mcp-token-1234567' });
    await connect(stack, 'legacy', { token: 'mcp-token-1234567' });
    await expect(connect(stack, 'legacy', { token: 'mcp-token-1234567' })).rejects.toThrow(
      /Too many open MCP sessions for this credential \(MCP_MAX_SESSIONS=2\)/,
    );
    const operator = await connect(stack, 'legacy', { token: 'admin-token-123456' });
    expect((await operator.listTools()).tools.map((t) => t.name)).toContain('manage_toolsets');
    expect(stack.face.legacySessions()).toBe(3);
  });
});

describe('transport security of /mcp', () => {
  it('refuses a foreign Origin or Host, an oversized body, and a missing or wrong token', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      tokens: { admin: 'adm-1', agent: 'agt-2', mcp: 'mcp-3' },
    });
    const s = stack;
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const send = (headers: Record<string, string>, body = JSON.stringify(init)) =>
      s.gatewayApp.request('/mcp', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body,
      });
    const auth = { authorization: 'Bearer mcp-3' };
    expect((await send({ ...auth, origin: 'https://evil.example' })).status).toBe(403);
    expect((await send({ ...auth, host: 'evil.example' })).status).toBe(403);
    expect((await send({})).status).toBe(401);
    expect((await send({ authorization: 'Bearer wrong' })).status).toBe(401);
    // The agent's credential is not an MCP credential.
    expect((await send({ authorization: 'Bearer agt-2' })).status).toBe(403);
    const big = JSON.stringify({ ...init, params: { ...init.params, pad: 'x'.repeat(5 * 1024 * 1024) } });
    expect((await send(auth, big)).status).toBe(413);
    expect((await send(auth)).status).toBe(200);
  });
});

describe('session handles', () => {
  it('keeps at most a bounded number per credential, dropping the least recently used', async () => {
    const { openDatabase } = await import('../../../lib/db/sqlite.ts');
    const { handleStore } = await import('../../../mcp-gateway/face/handles.ts');
    const { openGatewayState } = await import('../../../mcp-gateway/store/store.ts');
    const { retain } = await import('../../helpers/stack.ts');
    const db = openDatabase(':memory:');
    const state = await openGatewayState({ db });
    let clock = 0;
    const handles = handleStore(state.handles, {
      idleMs: 3_600_000,
      maxPerCredential: 3,
      now: () => clock++,
    });
    retain(db, handles);
    const minted: string[] = [];
    for (let i = 0; i < 4; i++) minted.push(await handles.mint('cred-a'));
    const other = await handles.mint('cred-b');
    await expect(handles.use(minted[0], 'cred-a')).rejects.toThrow(/Unknown session handle/);
    for (const h of minted.slice(1)) expect(await handles.use(h, 'cred-a')).toBe(h);
    expect(await handles.use(other, 'cred-b')).toBe(other);
    await state.close();
  });
});

describe('a fixed view of an upstream server', () => {
  it('passes the server’s own prompts and resources through, and its tools', async () => {
    stack = await makeStack({
      toolsets: {
        ...SPLIT_TOOLSETS,
        'everything.yaml': `id: everything
description: The MCP reference test server.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`,
      },
    });
    const client = await connect(stack, 'legacy', { path: '/mcp/toolsets/everything' });
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toContain('echo');
    expect(tools).not.toContain('manage_toolsets');
    const echoed = await client.callTool({ name: 'echo', arguments: { message: 'through the view' } });
    expect(text(echoed)).toBe('Echo: through the view');
    const prompts = (await client.listPrompts()).prompts;
    expect(prompts.length).toBeGreaterThan(0);
    const simple = prompts.find((p) => (p.arguments ?? []).every((a) => !a.required)) ?? prompts[0];
    const got = await client.getPrompt({ name: simple.name, arguments: {} });
    expect(got.messages.length).toBeGreaterThan(0);
    const resources = (await client.listResources()).resources;
    expect(resources.length).toBeGreaterThan(0);
    expect(resources.map((r) => r.uri)).not.toContain('toolshift://toolsets');
    const read = await client.readResource({ uri: resources[0].uri });
    expect(read.contents[0].uri).toBe(resources[0].uri);
  });
});

describe('a fixed view of a toolset the operator disabled', () => {
  const EVERYTHING = `id: everything
description: The MCP reference test server.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`;
  const admin = (action: 'ENABLE' | 'DISABLE') =>
    (stack as Stack).post((stack as Stack).gatewayApp, '/mcp/admin/toolsets', {
      action,
      toolset_ids: ['everything'],
    });

  it('never starts its server and serves none of its tools, prompts or resources, on every request; reads are audited', async () => {
    stack = await makeStack({ toolsets: { ...SPLIT_TOOLSETS, 'everything.yaml': EVERYTHING } });
    expect((await admin('DISABLE')).status).toBe(200);
    // Before: the view started the server and passed its prompts and resources through.
    await expect(connect(stack, 'legacy', { path: '/mcp/toolsets/everything' })).rejects.toThrow(
      /403|disabled/,
    );
    expect(stack.gateway.upstreams()['mcp-server-everything stdio']?.state ?? 'idle').toBe('idle');
    expect(Object.values(stack.gateway.upstreams()).every((u) => u.pid === undefined)).toBe(true);

    // Enabled, the view serves them; then the operator disables it while the client holds its session.
    expect((await admin('ENABLE')).status).toBe(200);
    const client = await connect(stack, 'legacy', { path: '/mcp/toolsets/everything' });
    expect((await client.listPrompts()).prompts.length).toBeGreaterThan(0);
    const resources = (await client.listResources()).resources;
    expect(resources.length).toBeGreaterThan(0);
    expect((await admin('DISABLE')).status).toBe(200);
    await expect(client.listPrompts()).rejects.toThrow(/disabled/);
    await expect(client.readResource({ uri: resources[0].uri })).rejects.toThrow(/disabled/);
    await expect(client.callTool({ name: 'echo', arguments: { message: 'x' } })).rejects.toThrow(/disabled/);

    const audit = await stack.get(stack.gatewayApp, '/mcp/admin/audit?limit=100');
    const reads = (audit.body.entries ?? audit.body.rows ?? audit.body.audit ?? []).filter(
      (r: { kind: string }) => r.kind === 'read',
    );
    expect(reads.map((r: { subject: string; ok: boolean }) => [r.subject, r.ok])).toEqual(
      expect.arrayContaining([
        ['everything prompts/list', true],
        ['everything resources/list', true],
      ]),
    );
  }, 30_000);
});
