import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTokenCounter } from '../../../lib/telemetry/tokens.ts';
import { manageToolsetsDefinition } from '../../../mcp-gateway/contract.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// ACTIVATE with `tools`: only some of a toolset's tools, so a big toolset does not cost every definition for one
// call. The tools array carries those, the token count is theirs, and a later call of another of its tools
// activates that one too (or is refused, with AUTO_ACTIVATE=false, naming what is active).

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const activate = (tools: string[], id = 'a1') =>
  call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'], tools }, id);

describe('ACTIVATE with tools', () => {
  it('offers only the tools asked for, counts only theirs, and adds one more when the model calls it', async () => {
    const model = new ScriptedModel([
      calls(activate(['write_file'])),
      calls(call('write_file', { path: 'a.txt', content: 'one' }, 'w1')),
      calls(call('edit_file', { path: 'a.txt', edits: [{ old_text: 'one', new_text: 'two' }] }, 'e1')),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'write a.txt' });
    expect(res.body.status).toBe('completed');
    expect(await readFile(path.join(stack.root, 'a.txt'), 'utf8')).toBe('two');
    expect(model.toolNames()).toEqual([
      ['manage_toolsets'],
      ['manage_toolsets', 'write_file'],
      ['manage_toolsets', 'write_file'],
      ['manage_toolsets', 'write_file', 'edit_file'],
    ]);
    const counter = createTokenCounter();
    const listed = await stack.get(stack.gatewayApp, `/mcp/tools?session_id=${res.body.session_id}`);
    const writeFile = listed.body.tools.find((t: { name: string }) => t.name === 'write_file');
    const one = counter.tools([
      { name: writeFile.name, description: writeFile.description, parameters: writeFile.parameters },
    ]);
    const activation = JSON.parse(model.toolMessages(1).a1);
    expect(activation.added_tools).toEqual(['write_file']);
    expect(activation.tool_definition_tokens).toMatchObject({
      change: one,
      total: counter.tool(manageToolsetsDefinition) + one,
    });
    // The call of edit_file activated that one tool, not the rest of fs_write.
    const told = JSON.parse(model.toolMessages(3).e1.split('\n\n')[1]);
    expect(told.activated_for_this_call).toMatch(
      /^Activated fs_write\. New tools: edit_file\. Tool definitions: \+/,
    );
    const listing = await stack.get(
      stack.gatewayApp,
      `/mcp/admin/toolsets?session_id=${res.body.session_id}`,
    );
    const fsWrite = listing.body.toolsets.find((t: { id: string }) => t.id === 'fs_write');
    expect(fsWrite).toMatchObject({ active: true, active_tools: ['write_file', 'edit_file'] });
    expect(fsWrite.tools).toEqual(['write_file', 'edit_file', 'delete_file']);
  });

  it('refuses a tool of another toolset, and, with AUTO_ACTIVATE=false, a call of a tool not asked for', async () => {
    const model = new ScriptedModel([
      calls(activate(['read_text_file'], 'bad')),
      calls(activate(['write_file'])),
      calls(call('delete_file', { path: 'a.txt' }, 'd1')),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS, autoActivate: false });
    await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'try' });
    expect(model.toolMessages(1).bad).toBe(
      'Error: Invalid arguments for ACTIVATE: tools read_text_file are not tools of fs_write. No tool named for ' +
        'fs_write: activate it in a call of its own. Their tools: fs_write: write_file, edit_file, delete_file',
    );
    expect(model.toolMessages(3).d1).toBe(
      'Error: Tool delete_file belongs to toolset fs_write, of which only write_file are active in this session; ' +
        'activate fs_write or its tool delete_file first',
    );
    const bad = await stack.post(stack.gatewayApp, '/mcp/manage_toolsets', {
      session_id: 'x',
      arguments: { action: 'DEACTIVATE', toolset_ids: ['fs_write'], tools: ['write_file'] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/only ACTIVATE takes tools/);
  });
});
