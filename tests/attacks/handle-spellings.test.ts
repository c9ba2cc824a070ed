import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Listening, listen } from '../../lib/http/serve.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

// Attack on issue 32 item 5 ("ids of another credential's handle are refused on every route"). Spellings of a
// handle or a view that pass the prefix check (case, a trailing dot, percent-encoding, the id given twice in a
// query) must not reach the handle's session on either store; and the reverse door: an MCP client naming a
// task's or a REST client's session as its `session` must be refused.

const TOKENS = {
  admin: 'admin-token-handle-spell',
  agent: 'agent-token-handle-spell',
  mcp: 'mcp-token-handle-spelling',
  user: 'user-token-handle-spelling',
};

let stack: Stack;
let server: Listening;
const clients: Client[] = [];

beforeAll(async () => {
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
  server = await listen(stack.gatewayApp, 0, '127.0.0.1');
});
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await server?.close();
  await stack?.close();
});

async function mcpClient(): Promise<Client> {
  const client = new Client(
    { name: 'spell', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${TOKENS.mcp}` } },
    }),
  );
  clients.push(client);
  return client;
}

type Result = { content?: { text: string }[]; isError?: boolean };

const rest = (token: string, method: string, url: string, body?: unknown) =>
  fetch(`${server.url}${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe('handle spellings and the reverse door', () => {
  it("no spelling of another credential's handle changes its session", async () => {
    const client = await mcpClient();
    const res = (await client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
    })) as Result;
    const handle = JSON.parse(res.content?.[0]?.text as string).session as string;
    const rest_ = handle.slice('mcp_'.length);
    const before = (await stack.gatewayStore.load(handle)).toolsets;
    expect(before).toEqual(['fs_write']);
    const spellings = [`MCP_${rest_}`, `Mcp_${rest_}`, `${handle}.`, `mcp_${rest_.toUpperCase()}`];
    for (const id of spellings) {
      await rest(TOKENS.agent, 'POST', '/mcp/admin/toolsets', {
        action: 'DEACTIVATE',
        toolset_ids: ['fs_write'],
        session_id: id,
      });
    }
    // Percent-encoded prefix, and the id twice in the query (own first, handle second, and the reverse).
    const enc = `mcp%5F${rest_}`;
    for (const q of [
      `session_id=${enc}`,
      `session_id=ses_mine&session_id=${handle}`,
      `session_id=${handle}&session_id=ses_mine`,
    ]) {
      const r = await rest(TOKENS.agent, 'GET', `/mcp/tools?${q}`);
      const body = (await r.json()) as { session_id?: string };
      expect(body.session_id ?? '', q).not.toBe(handle);
    }
    await stack.flushWrites();
    expect((await stack.gatewayStore.load(handle)).toolsets).toEqual(before);
  });

  it("an MCP client cannot name a task's or a REST client's session as its `session`", async () => {
    // A session the agent's credential made over REST, with fs_write active.
    const on = await rest(TOKENS.agent, 'POST', '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      session_id: 'ses_of_a_task',
    });
    expect(on.status).toBe(200);
    const client = await mcpClient();
    for (const session of ['ses_of_a_task', 'default']) {
      const r = (await client.callTool({
        name: 'manage_toolsets',
        arguments: { action: 'DEACTIVATE', toolset_ids: ['fs_write'], session },
      })) as Result;
      expect(r.isError, `${session}: ${r.content?.[0]?.text}`).toBe(true);
    }
    await stack.flushWrites();
    expect((await stack.gatewayStore.load('ses_of_a_task')).toolsets).toEqual(['fs_write']);
  });
});
