import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { type Listening, listen } from '../../../lib/http/serve.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Issue 16, per-invocation clients: the MCP Inspector's CLI and scripts open a new connection for every
// call, so on the legacy leg an ACTIVATE was gone by the next call, and a `session` handle given to call_tool
// there was silently ignored. Now a change of toolsets on the legacy leg takes a handle the result carries,
// and both legs act in the handle a call names (or refuse it, saying why). Real SDK clients — the v1 SDK
// desktop clients embed and the v2 client — over a real socket, one connection per call.

const MCP_TOKEN = 'mcp-token-for-clients-1';
const ADMIN_TOKEN = 'admin-token-for-clients-2';

let stack: Stack | undefined;
let server: Listening | undefined;
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close().catch(() => undefined);
  await server?.close();
  await stack?.close();
  server = undefined;
  stack = undefined;
});

/** The stack's gateway on a loopback port, as a desktop client reaches it. */
async function start(): Promise<string> {
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: { admin: ADMIN_TOKEN, mcp: MCP_TOKEN } });
  server = await listen(stack.gatewayApp, 0, '127.0.0.1');
  return `${server.url}/mcp`;
}

type Result = { content?: unknown; isError?: boolean; structuredContent?: unknown };
const text = (r: Result) => ((r.content as { text: string }[])[0] ?? { text: '' }).text;

/** A client as one invocation of a per-invocation client: connect, one call, close. */
interface OneShot {
  call(name: string, args: Record<string, unknown>): Promise<Result>;
  listTools(): Promise<string[]>;
  close(): Promise<void>;
  /** Ends the protocol session with DELETE /mcp, as some clients do on exit. */
  terminate(): Promise<void>;
}

/** The v1 SDK client (1.32.2, as desktop clients and the Inspector embed it), 2025-era. */
async function v1(url: string, token = MCP_TOKEN): Promise<OneShot> {
  const client = new ClientV1({ name: 'inspector-cli-like', version: '1.0.0' });
  const transport = new TransportV1(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  closers.push(() => client.close());
  return {
    call: async (name, args) => (await client.callTool({ name, arguments: args })) as Result,
    listTools: async () => (await client.listTools()).tools.map((t) => t.name),
    close: () => client.close(),
    terminate: () => transport.terminateSession(),
  };
}

/** The v2 client, on the legacy leg (pinned to 2025-11-25) or the modern one (2026-07-28). */
async function v2(url: string, era: 'legacy' | 'modern', token = MCP_TOKEN): Promise<OneShot> {
  const client = new ClientV2(
    { name: 'script', version: '1.0.0' },
    era === 'modern'
      ? { versionNegotiation: { mode: { pin: '2026-07-28' } } }
      : { supportedProtocolVersions: ['2025-11-25'] },
  );
  const transport = new TransportV2(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  expect(client.getProtocolEra()).toBe(era);
  closers.push(() => client.close());
  return {
    call: async (name, args) => (await client.callTool({ name, arguments: args })) as Result,
    listTools: async () => (await client.listTools()).tools.map((t) => t.name),
    close: () => client.close(),
    terminate: () => transport.terminateSession(),
  };
}

const activate = { action: 'ACTIVATE', toolset_ids: ['fs_write'] };

describe('toolsets kept across connections with a handle', () => {
  it('v1 SDK client: ACTIVATE in one connection, call_tool with the handle in the next', async () => {
    const url = await start();
    const first = await v1(url);
    const activated = await first.call('manage_toolsets', activate);
    expect(activated.isError).toBeFalsy();
    const body = JSON.parse(text(activated));
    expect(body.session).toMatch(/^mcp_[A-Za-z0-9_-]{22}$/);
    expect(body.active_toolsets).toEqual(['fs_write']);
    await first.close();

    const second = await v1(url);
    // A new connection starts from the defaults: without the handle, the tool is not active here.
    const without = await second.call('call_tool', {
      name: 'write_file',
      arguments: { path: 'without.txt', content: 'no' },
    });
    expect(without.isError).toBe(true);
    expect(existsSync(path.join((stack as Stack).root, 'without.txt'))).toBe(false);
    const written = await second.call('call_tool', {
      session: body.session,
      name: 'write_file',
      arguments: { path: 'kept.txt', content: 'across connections' },
    });
    expect(written.isError, text(written)).toBeFalsy();
    expect(await readFile(path.join((stack as Stack).root, 'kept.txt'), 'utf8')).toBe('across connections');
    // Having named the handle, the connection acts in it: its tools are listed and callable directly.
    expect(await second.listTools()).toEqual([
      'manage_toolsets',
      'call_tool',
      'write_file',
      'edit_file',
      'delete_file',
    ]);
    const direct = await second.call('write_file', { path: 'direct.txt', content: 'direct' });
    expect(direct.isError, text(direct)).toBeFalsy();
    await second.close();

    // manage_toolsets honours the handle too: a third connection deactivates in it.
    const third = await v1(url);
    const off = JSON.parse(
      text(
        await third.call('manage_toolsets', {
          action: 'DEACTIVATE',
          toolset_ids: ['fs_write'],
          session: body.session,
        }),
      ),
    );
    expect(off.session).toBe(body.session);
    expect(off.active_toolsets).toEqual([]);
    const gone = await third.call('call_tool', {
      session: body.session,
      name: 'write_file',
      arguments: { path: 'gone.txt', content: 'x' },
    });
    expect(gone.isError).toBe(true);
    expect(text(gone)).toMatch(/not active in this session; activate fs_write first/);
    expect(existsSync(path.join((stack as Stack).root, 'gone.txt'))).toBe(false);
  });

  it('v1 SDK client: a handle outlives a connection that ended with DELETE /mcp', async () => {
    const url = await start();
    const first = await v1(url);
    const { session } = JSON.parse(text(await first.call('manage_toolsets', activate)));
    await first.terminate();
    const second = await v1(url);
    const written = await second.call('call_tool', {
      session,
      name: 'write_file',
      arguments: { path: 'after-delete.txt', content: 'still here' },
    });
    expect(written.isError, text(written)).toBeFalsy();
    expect(await readFile(path.join((stack as Stack).root, 'after-delete.txt'), 'utf8')).toBe('still here');
  });

  it('v1 SDK client on the legacy leg: a bogus, malformed or foreign handle is refused, nothing runs', async () => {
    const url = await start();
    const mine = await v1(url);
    const { session } = JSON.parse(text(await mine.call('manage_toolsets', activate)));
    const other = await v1(url, ADMIN_TOKEN);
    const bogus = await other.call('call_tool', {
      session: 'mcp_AAAAAAAAAAAAAAAAAAAAAA',
      name: 'write_file',
      arguments: { path: 'bogus.txt', content: 'x' },
    });
    expect(bogus.isError).toBe(true);
    expect(text(bogus)).toMatch(
      /^Unknown session handle "mcp_AAAAAAAAAAAAAAAAAAAAAA". Call manage_toolsets with action ACTIVATE and no session to start a new one/,
    );
    // Another credential's handle is answered as an unknown one.
    const foreign = await other.call('call_tool', {
      session,
      name: 'write_file',
      arguments: { path: 'foreign.txt', content: 'x' },
    });
    expect(foreign.isError).toBe(true);
    expect(text(foreign)).toMatch(/Unknown session handle .* for this credential/);
    const listed = await other.call('manage_toolsets', { action: 'LIST', toolset_ids: [], session });
    expect(listed.isError).toBe(true);
    expect(text(listed)).toMatch(/Unknown session handle .* for this credential/);
    const malformed = await other.call('call_tool', { session: 42, name: 'write_file', arguments: {} });
    expect(malformed.isError).toBe(true);
    expect(text(malformed)).toBe('`session` must be a string handle');
    for (const f of ['bogus.txt', 'foreign.txt'])
      expect(existsSync(path.join((stack as Stack).root, f))).toBe(false);
    // The refusals changed nothing: the other connection still has only the meta-tools.
    expect(await other.listTools()).toEqual(['manage_toolsets', 'call_tool']);
  });

  it('v2 client: ACTIVATE in one connection, call_tool with the handle in the next, on either leg', async () => {
    const url = await start();
    const first = await v2(url, 'legacy');
    const { session, active_toolsets } = JSON.parse(text(await first.call('manage_toolsets', activate)));
    expect(active_toolsets).toEqual(['fs_write']);
    await first.close();

    const second = await v2(url, 'legacy');
    const legacyCall = await second.call('call_tool', {
      session,
      name: 'write_file',
      arguments: { path: 'v2-legacy.txt', content: 'legacy' },
    });
    expect(legacyCall.isError, text(legacyCall)).toBeFalsy();
    await second.close();

    // The handle is the same kind on both legs: a stateless client names it too.
    const modern = await v2(url, 'modern');
    const modernCall = await modern.call('call_tool', {
      session,
      name: 'write_file',
      arguments: { path: 'v2-modern.txt', content: 'modern' },
    });
    expect(modernCall.isError, text(modernCall)).toBeFalsy();
    const root = (stack as Stack).root;
    expect(await readFile(path.join(root, 'v2-legacy.txt'), 'utf8')).toBe('legacy');
    expect(await readFile(path.join(root, 'v2-modern.txt'), 'utf8')).toBe('modern');

    // And the other way round: a handle minted on the modern leg, named on the legacy leg.
    const minted = JSON.parse(
      text(await modern.call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] })),
    );
    const legacy = await v2(url, 'legacy');
    const read = await legacy.call('call_tool', {
      session: minted.session,
      name: 'read_text_file',
      arguments: { path: 'v2-modern.txt' },
    });
    expect(read.isError, text(read)).toBeFalsy();
    expect(text(read)).toContain('modern');
  });
  it('tells every legacy connection acting in a handle when its toolsets change, from either leg', async () => {
    const url = await start();
    const listening = async () => {
      const client = new ClientV2(
        { name: 'listener', version: '1.0.0' },
        { supportedProtocolVersions: ['2025-11-25'] },
      );
      await client.connect(
        new TransportV2(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${MCP_TOKEN}` } } }),
      );
      closers.push(() => client.close());
      const seen = { changes: 0 };
      client.setNotificationHandler('notifications/tools/list_changed', () => {
        seen.changes++;
      });
      return { client, seen };
    };
    const a = await listening();
    const { session } = JSON.parse(
      text((await a.client.callTool({ name: 'manage_toolsets', arguments: activate })) as Result),
    );
    await expect.poll(() => a.seen.changes).toBe(1);
    // B takes the handle (its tool list changes: it is told), then A deactivates: both are told.
    const b = await listening();
    await b.client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'LIST', toolset_ids: [], session },
    });
    await expect.poll(() => b.seen.changes).toBe(1);
    expect((await b.client.listTools()).tools.map((t) => t.name)).toContain('write_file');
    await a.client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'DEACTIVATE', toolset_ids: ['fs_write'] },
    });
    await expect.poll(() => [a.seen.changes, b.seen.changes]).toEqual([2, 2]);
    expect((await b.client.listTools()).tools.map((t) => t.name)).toEqual(['manage_toolsets', 'call_tool']);
    // A stateless client changing the handle's toolsets is heard by both too.
    const modern = await v2(url, 'modern');
    await modern.call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'], session });
    await expect.poll(() => [a.seen.changes, b.seen.changes]).toEqual([3, 3]);
    expect((await a.client.listTools()).tools.map((t) => t.name)).toContain('read_text_file');
  });
});
