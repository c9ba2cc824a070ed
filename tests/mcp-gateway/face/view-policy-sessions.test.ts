import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Server } from '@modelcontextprotocol/server';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { LegacySessions } from '../../../mcp-gateway/face/legacy-sessions.ts';
import { legacySessionStore } from '../../../mcp-gateway/face/legacy-store.ts';
import { openGatewayState } from '../../../mcp-gateway/store/store.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Two gaps left by the first pass on issue 15: a fixed view of a toolset whose ACTIVATION the policy denies
// (not only a disabled one) serves nothing of it, re-checked on every request; and a legacy MCP session that
// ends takes its own gateway session with it (they stayed behind until retention). Since issue 16 its
// toolsets live in a handle, which outlives the connection by design (tests/mcp-clients-*.test.ts).

let stack: Stack | undefined;
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  await stack?.close();
  stack = undefined;
});

/** An SDK v2 client on the 2025-era (sessionful) leg of the stack's gateway, served in-process. */
async function connectLegacy(s: Stack, urlPath = '/mcp') {
  const client = new Client(
    { name: 'test-client', version: '1.0.0' },
    { supportedProtocolVersions: ['2025-11-25'] },
  );
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1${urlPath}`), {
    fetch: async (url, init) => s.gatewayApp.request(String(url), init),
  });
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

const EVERYTHING = `id: everything
description: The MCP reference test server.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`;
const DENY_EVERYTHING =
  'rules:\n  - { toolset: everything, on: activate, decision: deny, reason: not on this host }\n';

/** Every upstream of the stack is idle: no process was started. */
const nothingStarted = (s: Stack) =>
  Object.values(s.gateway.upstreams()).every((u) => u.pid === undefined && (u.state ?? 'idle') === 'idle');

/** The gateway's audit rows of kind read, as [subject, ok, detail]. */
async function readRows(s: Stack) {
  await s.flushWrites();
  const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
  try {
    return db.prepare("SELECT subject, ok, detail FROM audit WHERE kind = 'read' ORDER BY id").all() as {
      subject: string;
      ok: number;
      detail: string | null;
    }[];
  } finally {
    db.close();
  }
}

describe('a fixed view of a toolset whose activation the policy denies', () => {
  it('never starts its server and serves nothing of it', async () => {
    stack = await makeStack({
      toolsets: { ...SPLIT_TOOLSETS, 'everything.yaml': EVERYTHING },
      policy: DENY_EVERYTHING,
    });
    await expect(connectLegacy(stack, '/mcp/toolsets/everything')).rejects.toThrow(/not on this host/);
    // A raw request, as any client sends it: refused with the policy's reason, nothing started.
    const raw = await stack.post(stack.gatewayApp, '/mcp/toolsets/everything', {
      jsonrpc: '2.0',
      id: 1,
      method: 'prompts/list',
      params: {},
    });
    expect(raw.status).toBe(403);
    expect(raw.body.error).toMatch(/toolset everything may not be activated \(not on this host\)/);
    expect(nothingStarted(stack)).toBe(true);
    expect(
      (await readRows(stack)).filter((r) => r.subject === 'everything' && r.ok === 0).length,
    ).toBeGreaterThan(0);
  }, 30_000);

  it('stops serving a held view the moment a reloaded policy denies it', async () => {
    stack = await makeStack({ toolsets: { ...SPLIT_TOOLSETS, 'everything.yaml': EVERYTHING } });
    const { client } = await connectLegacy(stack, '/mcp/toolsets/everything');
    expect((await client.listPrompts()).prompts.length).toBeGreaterThan(0);
    const resources = (await client.listResources()).resources;
    expect(resources.length).toBeGreaterThan(0);
    expect((await client.callTool({ name: 'echo', arguments: { message: 'hi' } })).isError).toBeFalsy();

    await writeFile(stack.policyFile, DENY_EVERYTHING);
    expect((await stack.post(stack.gatewayApp, '/mcp/admin/policy/reload', {})).status).toBe(200);
    // The same client, its session held: prompts, resources and tools are refused at once.
    await expect(client.listPrompts()).rejects.toThrow(/not on this host/);
    await expect(client.readResource({ uri: resources[0].uri })).rejects.toThrow(/not on this host/);
    await expect(client.callTool({ name: 'echo', arguments: { message: 'hi' } })).rejects.toThrow(
      /not on this host/,
    );
    await expect(client.listTools()).rejects.toThrow(/not on this host/);
    const refused = (await readRows(stack)).filter((r) => r.ok === 0);
    expect(refused.length).toBeGreaterThanOrEqual(4);
    // The gateway itself still answers.
    expect((await stack.get(stack.gatewayApp, '/health')).status).toBe(200);
  }, 30_000);
});

/** The gateway session rows behind `id`: its session row and its active toolsets. */
async function sessionRows(s: Stack, id: string) {
  await s.flushWrites();
  const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
  try {
    return {
      session: (db.prepare('SELECT COUNT(*) FROM sessions WHERE id = ?').pluck().get(id) as number) > 0,
      toolsets: db
        .prepare('SELECT toolset_id FROM session_toolsets WHERE session_id = ?')
        .pluck()
        .all(id) as string[],
    };
  } finally {
    db.close();
  }
}

/** How many legacy sessions the gateway keeps for a restart. */
function storedLegacySessions(s: Stack): number {
  const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
  try {
    return db.prepare('SELECT COUNT(*) FROM mcp_legacy_sessions').pluck().get() as number;
  } finally {
    db.close();
  }
}

describe('a legacy MCP session that ends', () => {
  it('takes its own gateway session and its stored record with it, and leaves its handle: DELETE /mcp and eviction', async () => {
    let clock = Date.now();
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, mcpMaxSessions: 1, now: () => clock });
    const a = await connectLegacy(stack);
    const activated = await a.client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_read'] },
    });
    expect(activated.isError).toBeFalsy();
    // The toolsets live in the handle the result carries, never under the session id (a bearer secret).
    const handleA = JSON.parse((activated.content as { text: string }[])[0].text).session as string;
    const idA = a.transport.sessionId as string;
    expect(await sessionRows(stack, handleA)).toEqual({ session: true, toolsets: ['fs_read'] });
    expect(await sessionRows(stack, idA)).toEqual({ session: false, toolsets: [] });
    expect(storedLegacySessions(stack)).toBe(1);

    // The client ends its session as 2025-era clients do: its record goes, its handle stays to be named.
    await a.transport.terminateSession();
    expect(stack.face.legacySessions()).toBe(0);
    expect(storedLegacySessions(stack)).toBe(0);
    expect((await sessionRows(stack, handleA)).toolsets).toEqual(['fs_read']);

    // Eviction: the credential's only slot is taken by an idle session, the next initialize closes it.
    const b = await connectLegacy(stack);
    await b.client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
    });
    clock += 120_000;
    const c = await connectLegacy(stack);
    expect(storedLegacySessions(stack)).toBe(1);
    // The newcomer works; the evicted session is unknown.
    expect((await c.client.listTools()).tools.map((t) => t.name)).toContain('manage_toolsets');
    await expect(b.client.listTools()).rejects.toThrow(/404|not found/i);
  }, 30_000);

  it('is reported ended on idle expiry, kept at shutdown, and a failing report stops no other ending', async () => {
    let clock = 1_000_000;
    const ended: string[] = [];
    const db = new Database(':memory:');
    const state = await openGatewayState({ db });
    const store = legacySessionStore(state.legacy);
    /** Each session's own gateway session, in the order they were opened. */
    const owners = new Map<string, unknown>();
    const sessions = new LegacySessions({
      build: (conn) => {
        owners.set(conn.ownSession, conn);
        return new Server({ name: 'bare', version: '1.0.0' }, { capabilities: {} });
      },
      store,
      idleMs: 60_000,
      maxSessions: 10,
      now: () => clock,
      onEnd: (id) => {
        ended.push(id);
        if (ended.length === 1) throw new Error('store closed');
      },
    });
    const initialize = () =>
      new Request('http://127.0.0.1/mcp', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: '{}',
      });
    const open = async () => {
      const body = {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      };
      const res = await sessions.handle(initialize(), null, body);
      expect(res.status).toBe(200);
      return res.headers.get('mcp-session-id') as string;
    };
    await open();
    await open();
    clock += 30_000;
    await open();
    const [first, second, third] = [...owners.keys()];
    clock += 45_000; // the first two are idle 75 s, past the 60 s lifetime; the third 45 s
    await sessions.sweep();
    expect(ended.sort()).toEqual([first, second].sort());
    expect(sessions.size).toBe(1);
    // Shutdown closes the connection but keeps the session, for its client to come back to after a restart.
    await sessions.close();
    expect(ended).not.toContain(third);
    expect(sessions.size).toBe(0);
    expect(db.prepare('SELECT COUNT(*) FROM mcp_legacy_sessions').pluck().get()).toBe(1);
    await state.close();
  });
});
