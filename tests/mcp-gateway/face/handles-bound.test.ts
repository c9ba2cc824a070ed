import { existsSync } from 'node:fs';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Listening, listen } from '../../../lib/http/serve.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Issue 32, item 5: an MCP client's session (its handle, or a fixed view's) is usable only through the door
// and by the credential that made it. The agent's token and the operator's, naming such an id as `session_id`
// on the gateway's REST routes or on execute_task, are refused, and the session's toolsets, the workspace and
// the audit are as they were: no act in it by another credential, on SQLite and PostgreSQL alike.

const TOKENS = {
  admin: 'admin-token-handles-bound',
  agent: 'agent-token-handles-bound',
  mcp: 'mcp-token-handles-bound',
  user: 'user-token-handles-bound',
};

let stack: Stack;
let server: Listening;
let base = '';
const clients: Client[] = [];
/** The model a task would run with: it writes a file and drops the session's toolset, if it ever runs. */
const model = new ScriptedModel(
  Array.from({ length: 6 }, (_, i) =>
    i % 3 === 0
      ? calls(call('write_file', { path: 'by-task.txt', content: 'written by a task' }))
      : i % 3 === 1
        ? calls(call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['fs_write'] }))
        : answer('done'),
  ),
);

beforeAll(async () => {
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS, model });
  server = await listen(stack.gatewayApp, 0, '127.0.0.1');
  base = server.url;
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await server?.close();
  await stack?.close();
});

/** A real SDK client of the face (the modern era, where a handle is the session), with `token`. */
async function mcpClient(url: string, token: string): Promise<Client> {
  const client = new Client(
    { name: 'bound-test', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  clients.push(client);
  return client;
}

type Result = { content?: unknown; isError?: boolean };
const text = (r: Result) => ((r.content as { text: string }[])[0] ?? { text: '' }).text;

/** A handle minted through the face by `token`'s client, with fs_write active in it. */
async function handleOf(token: string): Promise<{ client: Client; handle: string }> {
  const client = await mcpClient(`${base}/mcp`, token);
  const res = (await client.callTool({
    name: 'manage_toolsets',
    arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
  })) as Result;
  expect(res.isError, text(res)).toBeFalsy();
  const handle = JSON.parse(text(res)).session as string;
  expect(handle).toMatch(/^mcp_/);
  return { client, handle };
}

const rest = (token: string, method: string, url: string, body?: unknown) =>
  fetch(`${base}${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** Every gateway REST route that names a session, naming `id`. */
const sessionRoutes = (token: string, id: string) => [
  rest(token, 'POST', '/mcp/admin/toolsets', {
    action: 'DEACTIVATE',
    toolset_ids: ['fs_write'],
    session_id: id,
  }),
  rest(token, 'POST', '/mcp/admin/toolsets', {
    action: 'ACTIVATE',
    toolset_ids: ['fs_read'],
    session_id: id,
  }),
  rest(token, 'POST', '/mcp/manage_toolsets', {
    session_id: id,
    arguments: { action: 'DEACTIVATE', toolset_ids: ['fs_write'] },
  }),
  rest(token, 'GET', `/mcp/admin/toolsets?session_id=${encodeURIComponent(id)}`),
  rest(token, 'GET', `/mcp/tools?session_id=${encodeURIComponent(id)}`),
  rest(token, 'POST', '/mcp/tools/write_file/call', {
    session_id: id,
    arguments: { path: 'by-rest.txt', content: 'written over REST' },
  }),
];

/** What a session is: its active toolsets and its audit rows. */
const stateOf = async (id: string) => ({
  active: (await stack.gatewayStore.load(id)).toolsets,
  audit: await stack.gateway.listAudit({ session_id: id, limit: 500 }),
});

describe("an MCP client's session, named through another door", () => {
  it('is refused to every other credential on every REST route and on execute_task, with nothing changed', async () => {
    const { client, handle } = await handleOf(TOKENS.mcp);
    // A fixed view's session, opened by a client of the view.
    const viewer = await mcpClient(`${base}/mcp/toolsets/fs_read`, TOKENS.mcp);
    expect((await viewer.listTools()).tools.map((t) => t.name)).toContain('read_text_file');
    const view = 'view:fs_read';
    const before = { handle: await stateOf(handle), view: await stateOf(view) };
    expect(before.handle.active).toEqual(['fs_write']);
    expect(before.view.active).toEqual(['fs_read']);

    for (const token of [TOKENS.agent, TOKENS.admin]) {
      for (const id of [handle, view]) {
        for (const res of await Promise.all(sessionRoutes(token, id))) {
          expect(res.status, `${res.url} ${id}`).toBe(400);
          const body = (await res.json()) as { error: string; code: string };
          expect(body.code).toBe('invalid_arguments');
          expect(body.error).toMatch(/not starting with mcp_ or view:/);
        }
      }
    }
    for (const id of [handle, view]) {
      const res = await stack.agentApp.request('/agent/execute_task', {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKENS.user}`, 'content-type': 'application/json' },
        body: JSON.stringify({ goal: 'act in an MCP client’s session', session_id: id, wait: true }),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(
        /session_id.*not starting with mcp_ or view:/,
      );
    }

    // Nothing happened in either session: the same toolsets, the same audit, no file, no task, no model call.
    await stack.flushWrites();
    expect({ handle: await stateOf(handle), view: await stateOf(view) }).toEqual(before);
    expect(existsSync(path.join(stack.root, 'by-rest.txt'))).toBe(false);
    expect(existsSync(path.join(stack.root, 'by-task.txt'))).toBe(false);
    expect(model.requests).toHaveLength(0);
    const tasks = await stack.agentApp.request('/agent/tasks', {
      headers: { authorization: `Bearer ${TOKENS.user}` },
    });
    expect(((await tasks.json()) as { tasks: unknown[] }).tasks).toEqual([]);

    // The client that made the handle still acts in it.
    const own = (await client.callTool({
      name: 'call_tool',
      arguments: {
        session: handle,
        name: 'write_file',
        arguments: { path: 'by-owner.txt', content: 'mine' },
      },
    })) as Result;
    expect(own.isError, text(own)).toBeFalsy();
    expect(existsSync(path.join(stack.root, 'by-owner.txt'))).toBe(true);
  });

  it('lets the credential that made a handle use it over REST, and no other', async () => {
    // The operator's token opens the face too: a handle it made is its own on the REST routes.
    const { handle } = await handleOf(TOKENS.admin);
    const mine = await rest(TOKENS.admin, 'GET', `/mcp/tools?session_id=${handle}`);
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { tools: { name: string }[] }).tools.map((t) => t.name)).toContain(
      'write_file',
    );
    const before = await stateOf(handle);
    for (const res of await Promise.all(sessionRoutes(TOKENS.agent, handle))) expect(res.status).toBe(400);
    await stack.flushWrites();
    expect(await stateOf(handle)).toEqual(before);
    // An id in the face's namespace that no one made is refused too, in the same words.
    const unknown = await rest(TOKENS.admin, 'GET', '/mcp/tools?session_id=mcp_nobody_made_this');
    expect(unknown.status).toBe(400);
    // Any other id is the caller's to name, as before.
    const other = await rest(TOKENS.agent, 'GET', '/mcp/tools?session_id=ses_of_my_own');
    expect(other.status).toBe(200);
  });
});
