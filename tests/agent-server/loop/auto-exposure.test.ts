import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// exposure "auto" (the default TOOL_EXPOSURE): a catalog whose tool definitions fit under AUTO_EXPOSURE_TOKENS is
// loaded whole before the first model call, so no turn goes to manage_toolsets; a larger one runs dynamic.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const ALL_TOOLS = [
  'manage_toolsets',
  'read_text_file',
  'list_directory',
  'search_files',
  'write_file',
  'edit_file',
  'delete_file',
];
type Event = { type: string; data: Record<string, unknown> };

async function run(s: Stack, body: Record<string, unknown>) {
  const res = await s.post(s.agentApp, '/agent/execute_task', body);
  const task = await s.get(s.agentApp, `/agent/tasks/${res.body.task_id}`);
  return { res, events: task.body.events as Event[] };
}

describe('exposure auto', () => {
  it('loads a small catalog whole before the first model call, and the task runs native', async () => {
    const model = new ScriptedModel([
      calls(call('write_file', { path: 'a.txt', content: 'all loaded' }, 'w1')),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS, exposure: 'auto', prime: true });
    const { res, events } = await run(stack, { goal: 'write a.txt' });
    expect(res.body).toMatchObject({ status: 'completed', steps: 2 });
    expect(await readFile(path.join(stack.root, 'a.txt'), 'utf8')).toBe('all loaded');
    expect(model.toolNames()).toEqual([ALL_TOOLS, ALL_TOOLS]);
    const loaded = events.find((e) => e.type === 'toolset_change');
    expect(loaded?.data).toMatchObject({
      step: 0,
      action: 'ACTIVATE',
      toolset_ids: ['fs_read', 'fs_write'],
      all_loaded: true,
    });
    // Nothing was activated for a call: the write ran as an active tool.
    expect(events.filter((e) => e.type === 'toolset_change')).toHaveLength(1);
    const requests = events.filter((e) => e.type === 'model_request');
    expect(requests.map((e) => e.data.exposure)).toEqual(['native', 'native']);
    // The model is told, under its goal.
    expect(String(model.requests[0].messages[1].content)).toMatch(
      /toolshift activated fs_read, fs_write for this goal/,
    );
    const started = events.find((e) => e.type === 'task_started');
    expect(started?.data.exposure).toBe('auto');
  });

  it('runs dynamic when the catalog is over the threshold', async () => {
    const model = new ScriptedModel([
      calls(call('write_file', { path: 'b.txt', content: 'dynamic' }, 'w1')),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS, exposure: 'auto', autoExposureTokens: 100 });
    const { res, events } = await run(stack, { goal: 'write b.txt' });
    expect(res.body.status).toBe('completed');
    expect(model.toolNames()[0]).toEqual(['manage_toolsets']);
    // The write activated fs_write on the way (activation without a turn), nothing else.
    const changes = events.filter((e) => e.type === 'toolset_change');
    expect(changes.map((e) => [e.data.toolset_ids, e.data.automatic ?? false])).toEqual([
      [['fs_write'], true],
    ]);
    expect(model.toolNames()[1]).toEqual(['manage_toolsets', 'write_file', 'edit_file', 'delete_file']);
  });

  it('asks nobody for a toolset the policy guards: the task runs dynamic, no approval is left waiting', async () => {
    const model = new ScriptedModel([answer('done')]);
    stack = await makeStack({
      model,
      toolsets: SPLIT_TOOLSETS,
      exposure: 'auto',
      policy: 'rules:\n  - { toolset: fs_write, on: activate, decision: ask, reason: writes need a look }\n',
    });
    const { res } = await run(stack, { goal: 'look around' });
    expect(res.body.status).toBe('completed');
    expect(model.toolNames()[0]).toEqual(['manage_toolsets']);
    expect((await stack.get(stack.gatewayApp, '/mcp/admin/approvals')).body.approvals).toEqual([]);
  });

  it('lets a request ask for it whatever the server default is', async () => {
    const model = new ScriptedModel([answer('nothing to do')]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    await run(stack, { goal: 'look around', exposure: 'auto' });
    expect(model.toolNames()[0]).toEqual(ALL_TOOLS);
    const refused = await stack.post(stack.agentApp, '/agent/execute_task', {
      goal: 'x',
      exposure: 'everything',
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe(
      'Invalid request body: exposure: Invalid option: expected one of "auto"|"native"|"dispatch"|"code"',
    );
  });
});
