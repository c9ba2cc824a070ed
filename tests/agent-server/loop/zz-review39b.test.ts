import { afterEach, describe, expect, it } from 'vitest';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('review 39 b', () => {
  it('E: exposure auto with one ask-gated toolset files an approval nobody asked for and loads nothing', async () => {
    const model = new ScriptedModel([answer('done')]);
    stack = await makeStack({
      model,
      toolsets: SPLIT_TOOLSETS,
      exposure: 'auto',
      policy: 'rules:\n  - { toolset: fs_write, on: activate, decision: ask, reason: writes need a look }\n',
    });
    const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'read a.txt' });
    console.log('E status', res.body.status, 'tools', JSON.stringify(model.toolNames()));
    const approvals = await stack.get(stack.gatewayApp, '/mcp/admin/approvals');
    console.log('E approvals', JSON.stringify(approvals.body).slice(0, 600));
  });
});
