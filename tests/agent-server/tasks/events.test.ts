import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TaskDetail, TaskEvent } from '../../../agent-server/contract.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Task events are a contract (a union on `type`, each with its own data) that the CLI, the console and other
// clients read: every event a real task records parses as the contract says.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('task events', () => {
  it('each kind a task records matches its schema in the contract', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
      calls(call('write_file', { path: 'a.txt', content: 'x' }), call('write_file', { path: 7 })),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    // The `postgres` project runs this file with the tasks and the gateway's state in PostgreSQL.
    const embedded = process.env.TOOLSHIFT_TEST_STORE !== 'postgres';
    expect(stack.taskStore.embedded).toBe(embedded);
    expect(existsSync(path.join(stack.dataDir, 'gateway.db'))).toBe(embedded);
    const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'write a.txt' });
    expect(res.body.status).toBe('completed');
    const detail = TaskDetail.parse(
      (await stack.get(stack.agentApp, `/agent/tasks/${res.body.task_id}`)).body,
    );
    const types = detail.events.map((e) => e.type);
    expect(new Set(types)).toEqual(
      new Set([
        'task_started',
        'model_request',
        'model_call',
        'tool_call_started',
        'toolset_change',
        'tool_call',
        'task_finished',
      ]),
    );
    for (const e of detail.events) expect(TaskEvent.safeParse(e).success, e.type).toBe(true);
    const change = detail.events.find((e) => e.type === 'toolset_change');
    expect(change?.type === 'toolset_change' && change.data.added_tools).toEqual([
      'write_file',
      'edit_file',
      'delete_file',
    ]);
    // A payload that does not match its type is refused by the schema.
    const bad = { ...detail.events[0], type: 'tool_call' };
    expect(TaskEvent.safeParse(bad).success).toBe(false);
  });
});
