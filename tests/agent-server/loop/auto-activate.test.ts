import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Activation without a turn (AUTO_ACTIVATE): the model calls a tool whose toolset is not active, and the gateway
// activates the toolset and runs the call in the same turn — when the model's own ACTIVATE would have passed
// without a human. The model reads the result and what the activation did; the task records both.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const WRITE_TOOLS = ['write_file', 'edit_file', 'delete_file'];
type Event = { type: string; data: Record<string, unknown> };

async function run(s: Stack, body: Record<string, unknown>) {
  const res = await s.post(s.agentApp, '/agent/execute_task', body);
  const task = await s.get(s.agentApp, `/agent/tasks/${res.body.task_id}`);
  return { res, events: task.body.events as Event[] };
}

async function auditOf(s: Stack) {
  const listed = await s.get(s.gatewayApp, '/mcp/admin/audit?limit=200');
  return listed.body.audit as {
    kind: string;
    subject: string;
    ok: boolean;
    actor: string;
    detail: string | null;
  }[];
}

describe('activation without a turn', () => {
  it('activates the toolset of a tool called while inactive and runs the call in the same turn', async () => {
    const model = new ScriptedModel([
      calls(call('write_file', { path: 'a.txt', content: 'written' }, 'w1')),
      calls(call('edit_file', { path: 'a.txt', edits: [{ old_text: 'written', new_text: 'edited' }] }, 'e1')),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const { res, events } = await run(stack, { goal: 'write a.txt', prime: false });
    expect(res.body).toMatchObject({ status: 'completed', steps: 3, toolsets_used: ['fs_write'] });
    expect(await readFile(path.join(stack.root, 'a.txt'), 'utf8')).toBe('edited');
    // The first request offered only the meta-tool; the next carries the toolset activated on the way.
    expect(model.toolNames()).toEqual([
      ['manage_toolsets'],
      ['manage_toolsets', ...WRITE_TOOLS],
      ['manage_toolsets', ...WRITE_TOOLS],
    ]);
    const [result, told] = model.toolMessages(1).w1.split('\n\n');
    expect(JSON.parse(result)).toMatchObject({ action: 'created' });
    expect(JSON.parse(told).activated_for_this_call).toMatch(
      /^Activated fs_write\. New tools: write_file, edit_file, delete_file\. Tool definitions: \+\d[\d,]* tokens/,
    );
    const change = events.find((e) => e.type === 'toolset_change');
    expect(change?.data).toMatchObject({
      tool_call_id: 'w1',
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      added_tools: WRITE_TOOLS,
      automatic: true,
    });
    expect(change?.data.tool_definition_tokens).toMatchObject({ change: expect.any(Number) });
    const written = events.find((e) => e.type === 'tool_call' && e.data.tool_call_id === 'w1');
    expect(written?.data).toMatchObject({ name: 'write_file', toolset: 'fs_write', ok: true });
    // On the record as the model's activation, made for its call.
    const audit = await auditOf(stack);
    const activation = audit.find((a) => a.kind === 'activate' && a.subject === 'fs_write');
    expect(activation).toMatchObject({ ok: true, detail: 'automatic: the model called write_file' });
    expect(activation?.actor).toMatch(/^model in task /);
  });

  it('leaves to the model an activation the policy would ask a human for, and asks nobody', async () => {
    const model = new ScriptedModel([
      calls(call('write_file', { path: 'b.txt', content: 'x' }, 'w1')),
      answer('could not'),
    ]);
    stack = await makeStack({
      model,
      toolsets: SPLIT_TOOLSETS,
      policy: 'rules:\n  - { toolset: fs_write, on: activate, decision: ask, reason: writes need a look }\n',
    });
    const { res, events } = await run(stack, { goal: 'write b.txt', prime: false });
    expect(res.body.status).toBe('completed');
    expect(model.toolMessages(1).w1).toBe(
      'Error: Tool write_file belongs to toolset fs_write, which is not active in this session; activate fs_write ' +
        "first (it was not activated for this call: activating fs_write needs a human's approval (writes need a " +
        'look); ask for it with manage_toolsets ACTIVATE)',
    );
    expect(existsSync(path.join(stack.root, 'b.txt'))).toBe(false);
    expect(events.some((e) => e.type === 'toolset_change' || e.type === 'approval_needed')).toBe(false);
    const approvals = await stack.get(stack.gatewayApp, '/mcp/admin/approvals');
    expect(approvals.body.approvals).toEqual([]);
  });

  it('is off with AUTO_ACTIVATE=false: the call is refused as inactive and nothing runs', async () => {
    const model = new ScriptedModel([
      calls(call('write_file', { path: 'c.txt', content: 'x' }, 'w1')),
      answer('could not'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS, autoActivate: false });
    await run(stack, { goal: 'write c.txt', prime: false });
    expect(model.toolMessages(1).w1).toBe(
      'Error: Tool write_file belongs to toolset fs_write, which is not active in this session; activate fs_write first',
    );
    expect(existsSync(path.join(stack.root, 'c.txt'))).toBe(false);
  });

  it('gives a dispatch task the definitions of the tools activated for its call_tool', async () => {
    const model = new ScriptedModel([
      calls(
        call(
          'call_tool',
          { name: 'write_file', arguments: { path: 'd.txt', content: 'via dispatch' } },
          'd1',
        ),
      ),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const { res } = await run(stack, { goal: 'write d.txt', exposure: 'dispatch', prime: false });
    expect(res.body.status).toBe('completed');
    expect(await readFile(path.join(stack.root, 'd.txt'), 'utf8')).toBe('via dispatch');
    const told = JSON.parse(model.toolMessages(1).d1.split('\n\n')[1]);
    expect(told.tools.map((t: { name: string }) => t.name)).toEqual(WRITE_TOOLS);
    expect(told.tools[0].parameters.required).toEqual(['path', 'content']);
    // The tools array stays fixed in dispatch.
    expect(model.toolNames()[1]).toEqual(['manage_toolsets', 'call_tool']);
  });
});
