import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Model, ModelRequest } from '../../../agent-server/clients/model.ts';
import { answer, call, calls } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// A team's ceiling (lib/identity/team-toolsets.ts): toolsets its members may not use, inside the operator's. A
// member's task cannot activate one (the model is told which team said so), nor call one of its tools; a user of
// another team, and a service token's task, are not held by it; lifting it lets the member use it again.

/** Activates fs_write, then writes; answers with what the activation and the write came to. */
const model: Model = {
  async complete(request: ModelRequest) {
    const said = request.messages.filter((m) => m.role === 'assistant').length;
    if (said === 0) return calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }));
    if (said === 1) return calls(call('write_file', { path: 'x.txt', content: 'x' }));
    const results = request.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
    return answer(results.join('\n---\n'));
  },
};

let s: Stack;
const keys: Record<string, string> = {};
const admin = { authorization: 'Bearer admin-token' };

beforeAll(async () => {
  s = await makeStack({
    tokens: { admin: 'admin-token', agent: 'agent-token', user: 'user-token' },
    toolsets: SPLIT_TOOLSETS,
    model,
  });
  const people = s.identity;
  if (!people) throw new Error('the stack has no identity store');
  await people.addTeam({ name: 'eng' });
  await people.addTeam({ name: 'ops' });
  for (const [name, team] of [
    ['alice', 'eng'],
    ['bob', 'ops'],
  ]) {
    await people.addUser({ name, teams: [team] });
    keys[name] = (await people.createKey({ user: name, role: 'runner' })).key;
  }
});

afterAll(async () => {
  await s?.close();
});

const run = async (authorization: string) =>
  (await s.post(s.agentApp, '/agent/execute_task', { goal: 'write x' }, { authorization })).body;

describe("a team's ceiling", () => {
  it('is set by the operator and listed with the team', async () => {
    const res = await s.put(s.gatewayApp, '/mcp/admin/teams/eng/toolsets', { disable: ['fs_write'] }, admin);
    expect(res.status).toBe(200);
    expect(res.body.disabled_toolsets).toEqual(['fs_write']);
    const bad = await s.put(s.gatewayApp, '/mcp/admin/teams/eng/toolsets', { disable: ['No Such'] }, admin);
    expect(bad.status).toBe(400);
    const asAlice = await s.put(
      s.gatewayApp,
      '/mcp/admin/teams/eng/toolsets',
      { enable: ['fs_write'] },
      { authorization: `Bearer ${keys.alice}` },
    );
    expect(asAlice.status).toBe(403);
  });

  it("keeps a member's task from activating or calling what the team may not use; others are not held", async () => {
    const alice = await run(`Bearer ${keys.alice}`);
    expect(alice.status).toBe('completed');
    expect(alice.final_answer).toMatch(/your team may not use: fs_write \(team eng\)/);
    expect(alice.final_answer).not.toMatch(/Successfully wrote|"success":true/);
    const bob = await run(`Bearer ${keys.bob}`);
    expect(bob.final_answer).not.toMatch(/may not use/);
    expect(bob.toolsets_used).toContain('fs_write');
    const token = await run('Bearer user-token');
    expect(token.toolsets_used).toContain('fs_write');
  });

  it("applies a team's policy overlay to its members only, stricter than the operator's, never looser", async () => {
    const teamPolicy = (policy: string | null) =>
      s.put(s.gatewayApp, '/mcp/admin/teams/ops/policy', { policy }, admin);
    const bad = await teamPolicy('rules:\n  - { tool: write_file, decision: maybe }\n');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/team ops's policy/);
    const set = await teamPolicy(
      'default: allow\nrules:\n  - { tool: write_file, decision: deny, reason: ops writes nothing }\n',
    );
    expect(set.status).toBe(200);
    expect(set.body.policy).toMatch(/ops writes nothing/);
    // Bob (ops): his write is denied by his team's policy (read at most every two seconds); the operator's allows
    // it, and the token's task is no team's.
    await expect
      .poll(async () => (await run(`Bearer ${keys.bob}`)).final_answer, { timeout: 10_000, interval: 500 })
      .toMatch(/Denied by team ops's policy: write_file may not be called \(ops writes nothing\)/);
    const token = await run('Bearer user-token');
    expect(token.toolsets_used).toContain('fs_write');
  });

  it("applies a team's policy overlay to its members only, stricter than the operator's, never looser", async () => {
    const teamPolicy = (policy: string | null) =>
      s.put(s.gatewayApp, '/mcp/admin/teams/ops/policy', { policy }, admin);
    const bad = await teamPolicy('rules:\n  - { tool: write_file, decision: maybe }\n');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/team ops's policy/);
    const set = await teamPolicy(
      'default: allow\nrules:\n  - { tool: write_file, decision: deny, reason: ops writes nothing }\n',
    );
    expect(set.status).toBe(200);
    expect(set.body.policy).toMatch(/ops writes nothing/);
    // Bob (ops): his write is denied by his team's policy; the operator's allows it, and Alice's team has none.
    const bob = await run(`Bearer ${keys.bob}`);
    expect(bob.final_answer).toMatch(
      /Denied by team ops's policy: write_file may not be called \(ops writes nothing\)/,
    );
    const token = await run('Bearer user-token');
    expect(token.final_answer).not.toMatch(/Denied/);
    expect((await run(`Bearer ${keys.alice}`)).final_answer).not.toMatch(/Denied by team/);
    expect((await teamPolicy(null)).body.policy).toBeNull();
    await expect
      .poll(async () => (await run(`Bearer ${keys.bob}`)).final_answer, { timeout: 10_000, interval: 500 })
      .not.toMatch(/Denied/);
  });

  it('lets the member use it again once lifted', async () => {
    const res = await s.put(s.gatewayApp, '/mcp/admin/teams/eng/toolsets', { enable: ['fs_write'] }, admin);
    expect(res.body.disabled_toolsets).toEqual([]);
    // The gateway reads a user's teams' ceilings at most every two seconds.
    await expect
      .poll(async () => (await run(`Bearer ${keys.alice}`)).toolsets_used, { timeout: 10_000, interval: 500 })
      .toContain('fs_write');
  });
});
