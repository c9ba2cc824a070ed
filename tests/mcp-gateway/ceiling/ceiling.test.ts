import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const POLICY = `
default: allow
rules:
  - { tool: delete_file, decision: deny, reason: nothing is deleted here }
  - { tool: "write_*", decision: ask }
  - { toolset: fs_read, on: activate, decision: ask }
`;

const TOKENS = { admin: 'adm-tok-1', agent: 'agt-tok-2', user: 'usr-tok-3', mcp: 'mcp-tok-4' };
const as = (token: string) => ({ authorization: `Bearer ${token}` });

async function call(
  s: Stack,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  return s.post(s.gatewayApp, `/mcp/tools/${name}/call`, { session_id: 's1', arguments: args }, headers);
}

describe('the operator’s ceiling at the gateway', () => {
  it('denies, asks, and runs an approved call exactly once', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, policy: POLICY, tokens: TOKENS });
    const s = stack;
    const agent = { ...as(TOKENS.agent), 'x-toolshift-task': 'task_t1' };
    await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'ACTIVATE', toolset_ids: ['fs_write'], session_id: 's1' },
      agent,
    );
    await writeFile(path.join(s.root, 'keep.txt'), 'keep');

    const denied = await call(s, 'delete_file', { path: 'keep.txt' }, agent);
    expect(denied.status).toBe(403);
    expect(denied.body.error).toBe(
      "Denied by the operator's policy: delete_file may not be called (nothing is deleted here)",
    );
    expect(await readFile(path.join(s.root, 'keep.txt'), 'utf8')).toBe('keep');

    const asked = await call(s, 'write_file', { path: 'a.txt', content: 'one' }, agent);
    expect(asked.status).toBe(409);
    expect(asked.body.error).toMatch(
      /^Approval needed under the operator's policy: calling write_file .*approval apr_/,
    );
    const id = asked.body.approval.id as string;
    expect(asked.body.approval).toMatchObject({
      status: 'pending',
      subject: 'write_file',
      task_id: 'task_t1',
    });
    expect(existsSync(path.join(s.root, 'a.txt'))).toBe(false);

    // The agent's own credential cannot approve; the operator and a user of the agent's API can.
    const selfApproved = await s.post(
      s.gatewayApp,
      `/mcp/admin/approvals/${id}`,
      { approve: true },
      as(TOKENS.agent),
    );
    expect(selfApproved.status).toBe(403);
    const approved = await s.post(
      s.gatewayApp,
      `/mcp/admin/approvals/${id}`,
      { approve: true, reason: 'fine' },
      as(TOKENS.user),
    );
    expect(approved.body).toMatchObject({ status: 'approved', decided_by: 'user (AGENT_API_TOKEN)' });
    // Other arguments are another call, still asked for.
    expect((await call(s, 'write_file', { path: 'a.txt', content: 'two' }, agent)).status).toBe(409);
    // The same call, in another key order, runs once.
    const ran = await call(s, 'write_file', { content: 'one', path: 'a.txt' }, agent);
    expect(ran.status).toBe(200);
    expect(await readFile(path.join(s.root, 'a.txt'), 'utf8')).toBe('one');
    expect((await call(s, 'write_file', { path: 'a.txt', content: 'one' }, agent)).status).toBe(409);
    expect(
      (await s.post(s.gatewayApp, `/mcp/admin/approvals/${id}`, { approve: false }, as(TOKENS.admin))).status,
    ).toBe(409);

    const audit = await s.get(s.gatewayApp, '/mcp/admin/audit?task_id=task_t1', as(TOKENS.admin));
    const rows = audit.body.audit.map((r: { kind: string; subject: string; ok: boolean; actor: string }) => [
      r.kind,
      r.subject,
      r.ok,
      r.actor,
    ]);
    expect(rows).toContainEqual(['call', 'delete_file', false, 'model in task task_t1']);
    expect(rows).toContainEqual(['approval', 'write_file', true, 'model in task task_t1']);
    const decisions = await s.get(s.gatewayApp, '/mcp/admin/audit?session_id=s1', as(TOKENS.admin));
    expect(
      decisions.body.audit.some(
        (r: { actor: string; detail: string }) =>
          r.actor === 'user (AGENT_API_TOKEN)' && /approved by/.test(r.detail),
      ),
    ).toBe(true);
    // The audit is the operator's.
    expect((await s.get(s.gatewayApp, '/mcp/admin/audit', as(TOKENS.agent))).status).toBe(403);
  });

  it('asks before a toolset is activated, and lets a pending approval expire', async () => {
    let clock = 1_000_000;
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      policy: POLICY,
      approvalTimeoutMs: 60_000,
      now: () => clock,
    });
    const s = stack;
    const first = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read', 'fs_write'],
      session_id: 's2',
    });
    expect(first.status).toBe(409);
    expect(first.body.error).toMatch(/activating toolset fs_read/);
    // Nothing was activated, not even the toolset that needs no approval.
    expect((await s.get(s.gatewayApp, '/mcp/tools?session_id=s2')).body.tools).toEqual([]);
    clock += 61_000;
    const expired = await s.get(s.gatewayApp, `/mcp/admin/approvals?session_id=s2`);
    expect(expired.body.approvals[0].status).toBe('expired');
    const again = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 's2',
    });
    await s.post(s.gatewayApp, `/mcp/admin/approvals/${again.body.approval.id}`, { approve: true });
    const ok = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 's2',
    });
    expect(ok.body.active_toolsets).toEqual(['fs_read']);
  });

  it('rate-limits calls per session with retry-after, and caps activations per task', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      limits: { callsPerMinute: 3, activationsPerTask: 2 },
    });
    const s = stack;
    const task = { 'x-toolshift-task': 'task_cap' };
    await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'ACTIVATE', toolset_ids: ['fs_read'], session_id: 's1' },
      task,
    );
    await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'DEACTIVATE', toolset_ids: ['fs_read'], session_id: 's1' },
      task,
    );
    await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'ACTIVATE', toolset_ids: ['fs_write'], session_id: 's1' },
      task,
    );
    const third = await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'ACTIVATE', toolset_ids: ['fs_read'], session_id: 's1' },
      task,
    );
    expect(third.status).toBe(429);
    expect(third.body.error).toMatch(
      /^Activation limit: this task has activated toolsets 2 times \(the limit is 2\)/,
    );
    for (let i = 0; i < 3; i++)
      expect((await call(s, 'write_file', { path: `f${i}.txt`, content: 'x' })).status).toBe(200);
    const res = await s.gatewayApp.request('/mcp/tools/write_file/call', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 's1', arguments: { path: 'f3.txt', content: 'x' } }),
    });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await res.json()) as { error: string }).error).toMatch(
      /^Rate limit: this session made 3 tool calls in the last minute .* retry after \d+ s$/,
    );
    expect(existsSync(path.join(s.root, 'f3.txt'))).toBe(false);
    // Another session is not affected.
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      session_id: 's9',
    });
    expect(
      (
        await s.post(s.gatewayApp, '/mcp/tools/write_file/call', {
          session_id: 's9',
          arguments: { path: 'g.txt', content: 'x' },
        })
      ).status,
    ).toBe(200);
  });

  it('applies the same policy on the MCP face: an ask is a tool error naming the approval', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      policy: 'rules:\n  - { annotation: destructiveHint, decision: ask }\n',
    });
    const s = stack;
    const client = new Client(
      { name: 't', version: '1' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL('http://127.0.0.1/mcp'), {
        fetch: async (url, init) => s.gatewayApp.request(String(url), init),
      }),
    );
    const { session } = JSON.parse(
      (
        (
          await client.callTool({
            name: 'manage_toolsets',
            arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
          })
        ).content as { text: string }[]
      )[0].text,
    );
    const args = { session, name: 'write_file', arguments: { path: 'm.txt', content: 'via mcp' } };
    const asked = await client.callTool({ name: 'call_tool', arguments: args });
    expect(asked.isError).toBe(true);
    const message = (asked.content as { text: string }[])[0].text;
    expect(message).toMatch(/^Approval needed under the operator's policy: calling write_file/);
    expect(existsSync(path.join(s.root, 'm.txt'))).toBe(false);
    const id = /approval (apr_[A-Za-z0-9_-]+)/.exec(message)?.[1];
    await s.post(s.gatewayApp, `/mcp/admin/approvals/${id}`, { approve: true });
    expect((await client.callTool({ name: 'call_tool', arguments: args })).isError).toBeFalsy();
    expect(await readFile(path.join(s.root, 'm.txt'), 'utf8')).toBe('via mcp');
    await client.close();
  });

  it('reloads the policy, refusing a malformed one and keeping the one in force', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, policy: POLICY });
    const s = stack;
    expect((await s.get(s.gatewayApp, '/mcp/admin/policy')).body.rules).toHaveLength(3);
    await writeFile(s.policyFile, 'rules:\n  - { tool: x, decision: perhaps }\n');
    const bad = await s.post(s.gatewayApp, '/mcp/admin/policy/reload', {});
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/policy\.yaml: rule 1: decision: Invalid option/);
    expect((await s.get(s.gatewayApp, '/mcp/admin/policy')).body.rules).toHaveLength(3);
    await writeFile(s.policyFile, 'default: deny\n');
    expect((await s.post(s.gatewayApp, '/mcp/admin/policy/reload', {})).body).toMatchObject({
      default: 'deny',
      rules: [],
    });
    // The audit counts the rules in words: one rule is not "1 rules".
    await writeFile(s.policyFile, 'default: allow\nrules:\n  - { tool: write_file, decision: ask }\n');
    expect((await s.post(s.gatewayApp, '/mcp/admin/policy/reload', {})).status).toBe(200);
    const audit = await s.get(s.gatewayApp, '/mcp/admin/audit?kind=policy');
    expect(audit.body.audit.map((r: { detail: string }) => r.detail).slice(0, 2)).toEqual([
      '1 rule, default allow',
      '0 rules, default deny',
    ]);
  });
});
