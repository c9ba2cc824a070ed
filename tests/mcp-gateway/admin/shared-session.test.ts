import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Two attacks on users sharing the MCP face, shown failing. A fixed view (/mcp/toolsets/<ids>) is one session for
// every client: one user's approval must never be another's (each asks, is decided and spends their own), and
// no user learns of another's pending call. And a message with a byte-order mark is counted against the
// sender's tool calls a minute like any other (the SDK reads past the mark, so must the count).

let s: Stack;
const keys: Record<string, string> = {};

beforeAll(async () => {
  s = await makeStack({
    tokens: { admin: 'admin-token', agent: 'agent-token', mcp: 'mcp-token' },
    toolsets: SPLIT_TOOLSETS,
    policy: 'rules:\n  - { tool: list_directory, decision: ask }\n',
  });
  const people = s.identity;
  if (!people) throw new Error('the stack has no identity store');
  await people.addTeam({ name: 'eng' });
  await people.addTeam({ name: 'ops' });
  await people.addUser({ name: 'alice', teams: ['eng'] });
  await people.addUser({ name: 'bob', teams: ['ops'] });
  await people.addUser({ name: 'carol', teams: ['eng'] });
  await people.addUser({ name: 'lim', limits: { tool_calls_per_minute: 1 } });
  for (const [name, role] of [
    ['alice', 'runner'],
    ['bob', 'runner'],
    ['carol', 'approver'],
    ['lim', 'runner'],
  ] as const) {
    keys[name] = (await people.createKey({ user: name, role })).key;
  }
});

afterAll(async () => {
  await s?.close();
});

const CALL = {
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'list_directory', arguments: { path: '.' } },
};

async function call(who: string, body = JSON.stringify(CALL)) {
  const res = await s.gatewayApp.request('http://127.0.0.1/mcp/toolsets/fs_read', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${keys[who]}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body,
  });
  return { status: res.status, text: await res.text() };
}

const approvalIn = (text: string) => /apr_[A-Za-z0-9_-]+/.exec(text)?.[0];

it("never hands one user's approval to another in a shared session", async () => {
  const alice = approvalIn((await call('alice')).text);
  const bob = approvalIn((await call('bob')).text);
  expect(alice).toBeDefined();
  expect(bob).toBeDefined();
  // Two approvals: Bob is not told of Alice's pending call, and sees only his own.
  expect(bob).not.toBe(alice);
  const bobs = await s.get(s.gatewayApp, '/mcp/admin/approvals', { authorization: `Bearer ${keys.bob}` });
  expect(bobs.body.approvals.map((a: { id: string }) => a.id)).toEqual([bob]);
  // Carol (Alice's team) approves Alice's: Bob's call still waits, Alice's runs once.
  const decided = await s.post(
    s.gatewayApp,
    `/mcp/admin/approvals/${alice}`,
    { approve: true },
    { authorization: `Bearer ${keys.carol}` },
  );
  expect(decided.status).toBe(200);
  expect(approvalIn((await call('bob')).text)).toBe(bob);
  const ran = await call('alice');
  expect(approvalIn(ran.text)).toBeUndefined();
  expect(JSON.parse(ran.text).result.structuredContent).toMatchObject({ entries: [], truncated: false });
  // Spent: her next identical call asks again.
  expect(approvalIn((await call('alice')).text)).toMatch(/^apr_/);
});

it("counts a message with a byte-order mark against the sender's tool calls a minute", async () => {
  // Served by Node, as the gateway is: its body arrives as bytes, the mark with them.
  const server = serve({ fetch: s.gatewayApp.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((r) => server.once('listening', r));
  try {
    const { port } = server.address() as AddressInfo;
    const send = async () => {
      const res = await fetch(`http://127.0.0.1:${port}/mcp/toolsets/fs_read`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${keys.lim}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(CALL))]),
      });
      return { status: res.status, text: await res.text() };
    };
    expect((await send()).status).toBe(200);
    const second = await send();
    expect(second.status).toBe(429);
    expect(second.text).toMatch(/user lim reached the limit tool_calls_per_minute \(1\)/);
  } finally {
    await new Promise((r) => server.close(r));
  }
});
