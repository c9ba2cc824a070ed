import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Model, ModelRequest } from '../../../agent-server/clients/model.ts';
import { answer, call, calls } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Whose work the gateway shows a user's key (mcp-gateway/admin/scope.ts): a task run with a user's key is that
// user's work at the gateway (its calls' audit rows and its approvals carry them); a key that is not the
// operator's sees only its own user's, an approver's also their teammates', and what is out of sight answers as
// an id that does not exist.

const ASK_WRITES = 'rules:\n  - { tool: write_file, decision: ask }\n';

/** Each task activates fs_write, then writes a file named by its goal (paused there for an approval). */
const model: Model = {
  async complete(request: ModelRequest) {
    const said = request.messages.filter((m) => m.role === 'assistant').length;
    const goal = String(request.messages.find((m) => m.role === 'user')?.content);
    if (said === 0) return calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }));
    if (said === 1) return calls(call('write_file', { path: `${goal}.txt`, content: goal }, 'call_write'));
    return answer('written');
  },
};

let s: Stack;
const keys: Record<string, string> = {};
const ids: Record<string, string> = {};
const tasks: Record<string, string> = {};
const approvals: Record<string, string> = {};

const as = (name: string) => ({ authorization: `Bearer ${keys[name]}` });
const get = (name: string, url: string) => s.get(s.gatewayApp, url, as(name));
const decide = (name: string, id: string) =>
  s.post(s.gatewayApp, `/mcp/admin/approvals/${id}`, { approve: true }, as(name));
const listed = async (name: string) =>
  ((await get(name, '/mcp/admin/approvals')).body.approvals as { id: string }[]).map((a) => a.id).sort();
const audit = async (name: string) =>
  (await get(name, '/mcp/admin/audit?limit=1000')).body.audit as {
    actor: string;
    task_id: string | null;
    for_user: string | null;
  }[];

beforeAll(async () => {
  s = await makeStack({
    identity: true,
    tokens: { admin: 'admin-token', agent: 'agent-token', user: 'user-token' },
    toolsets: SPLIT_TOOLSETS,
    model,
    policy: ASK_WRITES,
  });
  const people = s.identity;
  if (!people) throw new Error('the stack has no identity store');
  await people.addTeam({ name: 'eng' });
  await people.addTeam({ name: 'ops' });
  const roles = {
    alice: 'runner',
    bob: 'runner',
    carol: 'approver',
    dave: 'approver',
    olga: 'operator',
  } as const;
  const teams: Record<string, string[]> = { bob: ['eng'], carol: ['eng'], dave: ['ops'], alice: ['ops'] };
  for (const [name, role] of Object.entries(roles)) {
    ids[name] = (await people.addUser({ name, teams: teams[name] })).id;
    keys[name] = (await people.createKey({ user: name, role })).key;
  }
  // Alice's and Bob's tasks, each paused on the approval of its write.
  for (const name of ['alice', 'bob']) {
    const res = await s.post(s.agentApp, '/agent/execute_task', { goal: name, wait: false }, as(name));
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    tasks[name] = res.body.task_id;
    await vi.waitFor(async () => {
      const task = await s.get(s.agentApp, `/agent/tasks/${tasks[name]}`, as(name));
      expect(task.body.status).toBe('awaiting_approval');
    }, 10_000);
    const all = (await get('olga', '/mcp/admin/approvals')).body.approvals as {
      id: string;
      task_id: string;
    }[];
    approvals[name] = all.find((a) => a.task_id === tasks[name])?.id as string;
  }
});

afterAll(async () => {
  await s?.close();
});

describe("whose work a user's key sees at the gateway", () => {
  it("records a task's calls and approvals as its owner's, the actor naming them", async () => {
    const approval = await get('olga', `/mcp/admin/approvals/${approvals.bob}`);
    expect(approval.body).toMatchObject({ task_id: tasks.bob, for_user: `user:${ids.bob}` });
    const rows = (await audit('olga')).filter((r) => r.task_id === tasks.bob);
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.for_user).toBe(`user:${ids.bob}`);
      expect(r.actor).toBe(`model in task ${tasks.bob} for user:${ids.bob}`);
    }
  });

  it('shows a runner only their own approvals and audit rows; another’s is a 404 as an unknown id is', async () => {
    expect(await listed('alice')).toEqual([approvals.alice]);
    expect((await get('alice', `/mcp/admin/approvals/${approvals.alice}`)).status).toBe(200);
    const theirs = await get('alice', `/mcp/admin/approvals/${approvals.bob}`);
    const unknown = await get('alice', '/mcp/admin/approvals/apr_madeup');
    expect(theirs.status).toBe(404);
    expect(theirs.body.error).toBe(unknown.body.error.replace('apr_madeup', approvals.bob));
    const rows = await audit('alice');
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.for_user === `user:${ids.alice}`)).toBe(true);
    expect(rows.some((r) => r.task_id === tasks.bob)).toBe(false);
    // The export too, whatever its filters.
    const exported = await s.gatewayApp.request('/mcp/admin/audit/export', { headers: as('alice') });
    const lines = (await exported.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((r) => r.id)).toEqual(rows.map((r) => (r as unknown as { id: number }).id));
    // A runner decides nothing.
    expect((await decide('alice', approvals.alice)).status).toBe(403);
  });

  it("scopes the agent-server's approvals alike: listed per key, decided by an approver of the team only", async () => {
    const list = async (name: string) =>
      ((await s.get(s.agentApp, '/agent/approvals', as(name))).body.approvals as { task_id: string }[])
        .map((a) => a.task_id)
        .sort();
    expect(await list('alice')).toEqual([tasks.alice]);
    expect(await list('carol')).toEqual([tasks.bob]);
    expect(await list('olga')).toEqual([tasks.alice, tasks.bob].sort());
    const viaAgent = (name: string, task: string) =>
      s.post(s.agentApp, `/agent/tasks/${task}/approvals/call_write`, { approve: false }, as(name));
    expect((await viaAgent('alice', tasks.alice)).status).toBe(403);
    const other = await viaAgent('carol', tasks.alice);
    const none = await viaAgent('carol', 'task_madeup');
    expect(other.status).toBe(404);
    expect(other.body.error).toBe(none.body.error.replace('task_madeup', tasks.alice));
    // Still waiting: nothing was decided by the refusals.
    expect(await list('olga')).toEqual([tasks.alice, tasks.bob].sort());
  });

  it('lets an approver decide their teammate’s approval; one of another team finds no such approval', async () => {
    const unknown = await decide('dave', 'apr_madeup');
    const other = await decide('dave', approvals.bob);
    expect(other.status).toBe(404);
    expect(other.body.error).toBe(unknown.body.error.replace('apr_madeup', approvals.bob));
    // Dave (ops, with Alice) sees Alice's; Carol (eng, with Bob) sees Bob's, not Alice's.
    expect(await listed('dave')).toEqual([approvals.alice]);
    expect(await listed('carol')).toEqual([approvals.bob]);
    expect((await decide('carol', approvals.alice)).status).toBe(404);
    const decided = await decide('carol', approvals.bob);
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ status: 'approved', for_user: `user:${ids.bob}` });
    expect(decided.body.decided_by).toMatch(/^user carol \(key [a-z0-9]{10}\)$/);
    // The decision is in Bob's audit, and so in Carol's sight; not in Dave's.
    const decision = (r: { actor: string; task_id: string | null }) =>
      r.task_id === tasks.bob && r.actor.startsWith('user carol');
    expect((await audit('carol')).some(decision)).toBe(true);
    expect((await audit('dave')).some(decision)).toBe(false);
  });

  it("shows the operator's key everything, a user's key none of the operator's own changes", async () => {
    // The operator's token acts for nobody: its rows are no user's.
    const reload = await s.post(
      s.gatewayApp,
      '/mcp/admin/reload',
      {},
      { authorization: 'Bearer admin-token' },
    );
    expect(reload.status).toBe(200);
    expect(await listed('olga')).toEqual([approvals.alice, approvals.bob].sort());
    const whose = new Set((await audit('olga')).map((r) => r.for_user));
    expect(whose).toEqual(new Set([`user:${ids.alice}`, `user:${ids.bob}`, null]));
    expect(new Set((await audit('alice')).map((r) => r.for_user))).toEqual(new Set([`user:${ids.alice}`]));
  });
});
