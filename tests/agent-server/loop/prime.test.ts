import { afterEach, describe, expect, it } from 'vitest';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// Goal-primed toolsets (agent-server/loop/prime.ts): before a task's first model call the agent activates the
// toolset discovery is certain the goal needs, through the gateway's manage_toolsets, so the ceiling, policy
// and budget judge it; the model is told and may deactivate it; a refusal or a policy that asks a human leaves
// the task as it was. On the repository's own toolsets.

const SHOP = 'How many orders and how much revenue per customer are in the shop database?';
const DB_TOOLS = ['list_databases', 'list_tables', 'describe_table', 'query'];

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

type Event = { type: string; data: Record<string, unknown> };
const eventsOf = async (s: Stack, taskId: string) =>
  ((await (await s.agentApp.request(`/agent/tasks/${taskId}`)).json()) as { events: Event[] }).events;

describe('goal-primed toolsets', () => {
  it('activate the certain toolset before the first model call; the model is told, uses it and may drop it', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['database_tools'] })),
      answer('done'),
    ]);
    stack = await makeStack({ model, prime: true });
    const result = await stack.agent.execute({ goal: SHOP });
    expect(result.status).toBe('completed');
    // The first request already carried the database tools, and the goal said why.
    const [first, second] = model.toolNames();
    for (const name of DB_TOOLS) expect(first).toContain(name);
    const user = model.requests[0].messages.find((m) => m.role === 'user');
    expect(String(user?.content)).toContain(SHOP);
    expect(String(user?.content)).toContain('toolshift activated database_tools for this goal');
    // The model's DEACTIVATE took them away again.
    for (const name of DB_TOOLS) expect(second).not.toContain(name);
    // The primed toolset is among those the task used.
    expect(result.toolsets_used).toContain('database_tools');
    const events = await eventsOf(stack, result.task_id);
    const change = events.find((e) => e.type === 'toolset_change');
    expect(change?.data).toMatchObject({
      step: 0,
      primed: true,
      action: 'ACTIVATE',
      toolset_ids: ['database_tools'],
    });
    // Before the first model request, on the record as the task's own activation.
    expect(events.findIndex((e) => e.type === 'toolset_change')).toBeLessThan(
      events.findIndex((e) => e.type === 'model_request'),
    );
    await stack.gatewayStore.flush();
    const { audit } = await stack.gatewayStore.listAudit({ limit: 50 });
    // The activation is the agent's own for the task (goal priming), the DEACTIVATE the model's.
    const rows = audit
      .filter((r) => r.subject.includes('database_tools') && r.ok)
      .map((r) => [r.kind, r.actor, r.task_id]);
    expect(rows).toContainEqual([
      'activate',
      `agent for task ${result.task_id} (goal priming)`,
      result.task_id,
    ]);
    expect(rows).toContainEqual(['deactivate', `model in task ${result.task_id}`, result.task_id]);
    expect(rows.some(([kind, actor]) => kind === 'activate' && String(actor).startsWith('model'))).toBe(
      false,
    );
  });

  it('a task taken over before its first checkpoint starts again with the priming note in its first request', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let asked: () => void = () => {};
    const firstAsked = new Promise<void>((r) => {
      asked = r;
    });
    // The first agent-server stops while the model thinks over the first request: nothing is checkpointed.
    const a = await makeStack({
      model: new ScriptedModel([
        async () => {
          asked();
          await held;
          return answer('too late');
        },
      ]),
      prime: true,
    });
    const submitted = await a.post(a.agentApp, '/agent/execute_task', { goal: SHOP, wait: false });
    const taskId = submitted.body.task_id as string;
    await firstAsked;
    const closing = a.close(true);
    release();
    await closing;
    const model = new ScriptedModel([answer('done')]);
    stack = await makeStack({ model, prime: true, dataDir: a.dataDir });
    await expect
      .poll(async () => (await stack?.get(stack.agentApp, `/agent/tasks/${taskId}`))?.body.status, {
        timeout: 5000,
      })
      .toBe('completed');
    const events = await eventsOf(stack, taskId);
    expect(events.find((e) => e.type === 'task_resumed')?.data).toMatchObject({ step: null });
    // Its first request again carries the tools and tells the model why, as the first time did.
    for (const name of DB_TOOLS) expect(model.toolNames()[0]).toContain(name);
    const user = model.requests[0].messages.find((m) => m.role === 'user');
    expect(String(user?.content)).toContain('toolshift activated database_tools for this goal');
    expect((await stack.get(stack.agentApp, `/agent/tasks/${taskId}`)).body.toolsets_used).toEqual([
      'database_tools',
    ]);
  });

  it('prime nothing when the request says no, or when no toolset is certain for the goal', async () => {
    const model = new ScriptedModel([answer('one'), answer('two')]);
    stack = await makeStack({ model, prime: true });
    expect((await stack.agent.execute({ goal: SHOP, prime: false })).status).toBe('completed');
    expect((await stack.agent.execute({ goal: 'Say hello in three languages.' })).status).toBe('completed');
    expect(model.toolNames()).toEqual([['manage_toolsets'], ['manage_toolsets']]);
  });

  it('a policy that asks a human to activate it: nothing primed, the task does not pause, no approval waits', async () => {
    const model = new ScriptedModel([answer('done')]);
    stack = await makeStack({
      model,
      prime: true,
      policy: 'default: allow\nrules:\n  - { toolset: database_tools, on: activate, decision: ask }\n',
    });
    const result = await stack.agent.execute({ goal: SHOP });
    expect(result.status).toBe('completed');
    expect(model.toolNames()).toEqual([['manage_toolsets']]);
    const approvals = (await (await stack.gatewayApp.request('/mcp/admin/approvals')).json()) as {
      approvals: { status: string }[];
    };
    expect(approvals.approvals.filter((a) => a.status === 'pending')).toEqual([]);
    expect((await eventsOf(stack, result.task_id)).some((e) => e.type === 'toolset_change')).toBe(false);
  });

  it('a toolset the operator disabled is not primed', async () => {
    const model = new ScriptedModel([answer('done')]);
    stack = await makeStack({ model, prime: true });
    const disabled = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'DISABLE',
      toolset_ids: ['database_tools'],
    });
    expect(disabled.status).toBe(200);
    expect((await stack.agent.execute({ goal: SHOP })).status).toBe('completed');
    expect(model.toolNames()).toEqual([['manage_toolsets']]);
  });
});
