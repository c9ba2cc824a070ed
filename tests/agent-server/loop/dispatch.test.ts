import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createGatewayClient } from '../../../agent-server/clients/gateway.ts';
import type { ModelRequest } from '../../../agent-server/clients/model.ts';
import { createTaskStore } from '../../../agent-server/store/store.ts';
import { createAgent } from '../../../agent-server/tasks/agent.ts';
import { loadConfig } from '../../../lib/config/config.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { fetchOf, log, makeStack, retain, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// TOOL_EXPOSURE=dispatch and `exposure` per task: the tools array stays [manage_toolsets, call_tool], the
// activation result carries the new tools' definitions, and the gateway still judges every call.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** A request in the provider's order, tools then messages, one JSON value per line. */
const serialise = (r: ModelRequest) =>
  [...r.tools.map((t) => JSON.stringify(t)), ...r.messages.map((m) => JSON.stringify(m))].join('\n');

const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

async function run(s: Stack, body: Record<string, unknown>) {
  return s.post(s.agentApp, '/agent/execute_task', body);
}

describe('dispatch exposure', () => {
  it('keeps the tools array fixed across toggles, so every request extends the previous one byte for byte', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'a1')),
      calls(
        call('call_tool', { name: 'write_file', arguments: { path: 'n/x.txt', content: 'hello\n' } }, 'a2'),
      ),
      calls(
        call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['fs_write'] }, 'a3'),
        call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] }, 'a4'),
      ),
      calls(call('call_tool', { name: 'read_text_file', arguments: { path: 'n/x.txt' } }, 'a5')),
      answer('It says hello.'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await run(stack, { goal: 'write then read', exposure: 'dispatch' });
    expect(res.body).toMatchObject({ status: 'completed', steps: 5, toolsets_used: ['fs_write', 'fs_read'] });
    expect(model.toolNames()).toEqual(Array(5).fill(['manage_toolsets', 'call_tool']));
    const tools = model.requests.map((r) => JSON.stringify(r.tools));
    expect(new Set(tools).size).toBe(1);
    for (let i = 1; i < model.requests.length; i++) {
      expect(serialise(model.requests[i]).startsWith(serialise(model.requests[i - 1]))).toBe(true);
    }
    expect(await readFile(path.join(stack.root, 'n/x.txt'), 'utf8')).toBe('hello\n');
    expect(JSON.parse(model.toolMessages(4).a5)).toMatchObject({ content: 'hello\n' });
  });

  it('returns the activated tools’ full definitions once, as the gateway serves them', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] }, 'd1')),
      calls(call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['fs_read'] }, 'd2')),
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read', 'fs_write'] }, 'd3')),
      answer('ok'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    await run(stack, { goal: 'look at the tools', exposure: 'dispatch' });
    const served = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read', 'fs_write'],
      session_id: 'reference',
    });
    expect(served.status).toBe(200);
    const reference = (await stack.get(stack.gatewayApp, '/mcp/tools?session_id=reference')).body.tools as {
      name: string;
      description: string;
      parameters: unknown;
    }[];
    const definition = (name: string) => {
      const t = reference.find((d) => d.name === name);
      return { name: t?.name, description: t?.description, parameters: t?.parameters };
    };

    const first = JSON.parse(model.toolMessages(1).d1);
    expect(first.active_toolsets).toEqual(['fs_read']);
    expect(first.tools).toEqual(['read_text_file', 'list_directory', 'search_files'].map(definition));
    expect(first.how_to_call).toMatch(/call_tool/);

    const off = JSON.parse(model.toolMessages(2).d2);
    expect(off.removed_tools).toEqual(['read_text_file', 'list_directory', 'search_files']);
    expect(off.tools).toBeUndefined();

    // Activated again: fs_read's definitions are already in the conversation, only fs_write's are new.
    const again = JSON.parse(model.toolMessages(3).d3);
    expect(again.tools.map((t: { name: string }) => t.name)).toEqual([
      'write_file',
      'edit_file',
      'delete_file',
    ]);
    expect(again.tools[0]).toEqual(definition('write_file'));
    expect(again.also_usable).toEqual(['read_text_file', 'list_directory', 'search_files']);
  });

  it('still refuses inactive tools and checks arguments against the real schema, running nothing', async () => {
    const model = new ScriptedModel([
      calls(call('call_tool', { name: 'write_file', arguments: { path: 'early.txt', content: 'x' } }, 'r1')),
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'r2')),
      calls(
        call('call_tool', { name: 'write_file', arguments: { path: 'bad.txt' } }, 'r3'),
        call('call_tool', { name: 'write_file', arguments: { path: 'bad.txt', content: 7 } }, 'r4'),
        call('write_file', { path: 'direct.txt', content: 'x' }, 'r5'),
      ),
      calls(
        call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['fs_write'] }, 'r6'),
        call('call_tool', { name: 'write_file', arguments: { path: 'late.txt', content: 'x' } }, 'r7'),
      ),
      answer('nothing written'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS, autoActivate: false });
    const res = await run(stack, { goal: 'try to write', exposure: 'dispatch' });
    expect(res.body.status).toBe('completed');
    expect(model.toolMessages(1).r1).toBe(
      'Error: Tool write_file belongs to toolset fs_write, which is not active in this session; activate fs_write first',
    );
    const bad = model.toolMessages(3);
    expect(bad.r3).toMatch(/^Error: Invalid arguments for write_file: missing required property 'content'/);
    expect(bad.r4).toMatch(/^Error: Invalid arguments for write_file: content must be string/);
    expect(bad.r5).toBe(
      'Error: write_file is not offered directly in this task; run it with call_tool: {"name": "write_file", "arguments": {…its parameters…}}',
    );
    expect(model.toolMessages(4).r7).toMatch(/which is not active in this session; activate fs_write first$/);
    for (const f of ['early.txt', 'bad.txt', 'direct.txt', 'late.txt'])
      expect(await exists(path.join(stack.root, f))).toBe(false);
  });

  it('tells the model what is wrong with a malformed call_tool', async () => {
    const model = new ScriptedModel([
      calls(
        call('call_tool', { arguments: {} }, 'm1'),
        call('call_tool', { name: 'read_text_file', arguments: 'path=x' }, 'm2'),
        call('call_tool', { name: 'read_text_file', path: 'x' }, 'm3'),
        call('call_tool', { name: 'manage_toolsets', arguments: { action: 'LIST' } }, 'm4'),
        call('call_tool', '{"name": ', 'm5'),
      ),
      answer('ok'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    await run(stack, { goal: 'malformed', exposure: 'dispatch' });
    const m = model.toolMessages(1);
    expect(m.m1).toBe('Error: call_tool needs `name`: the tool to run, as named in manage_toolsets results');
    expect(m.m2).toBe(
      'Error: call_tool’s `arguments` must be a JSON object with read_text_file\'s parameters, not "path=x"',
    );
    expect(m.m3).toBe(
      "Error: call_tool takes only {name, arguments}; remove path (put the tool's own parameters inside arguments)",
    );
    expect(m.m4).toBe('Error: manage_toolsets is not run through call_tool; call manage_toolsets directly');
    expect(m.m5).toMatch(/^Error: the arguments of call_tool are not valid JSON/);
  });

  it('records dispatched calls under the tool they ran, with its toolset', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'e1')),
      calls(call('call_tool', { name: 'write_file', arguments: { path: 'e.txt', content: 'e' } }, 'e2')),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await run(stack, { goal: 'events', exposure: 'dispatch' });
    const task = (await stack.get(stack.agentApp, `/agent/tasks/${res.body.task_id}`)).body;
    const started = task.events.find((e: { type: string }) => e.type === 'task_started');
    expect(started.data.exposure).toBe('dispatch');
    const requests = task.events.filter((e: { type: string }) => e.type === 'model_request');
    expect(requests.map((e: { data: { tools: string[] } }) => e.data.tools)).toEqual(
      Array(3).fill(['manage_toolsets', 'call_tool']),
    );
    const callStarted = task.events.find(
      (e: { type: string; data: { tool_call_id: string } }) =>
        e.type === 'tool_call_started' && e.data.tool_call_id === 'e2',
    );
    expect(callStarted.data.name).toBe('write_file');
    const done = task.events.find((e: { type: string }) => e.type === 'tool_call');
    expect(done.data).toMatchObject({ name: 'write_file', toolset: 'fs_write', ok: true });
    expect(done.data.arguments).toEqual({ path: 'e.txt', content: 'e' });
  });

  it('gives the definitions of toolsets already active when a dispatch task starts in the system prompt', async () => {
    const model = new ScriptedModel([
      calls(call('call_tool', { name: 'list_directory', arguments: { path: '.' } }, 's1')),
      answer('listed'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'ses_continued',
    });
    const res = await run(stack, { goal: 'list', exposure: 'dispatch', session_id: 'ses_continued' });
    expect(res.body.status).toBe('completed');
    const system = String(model.requests[0].messages[0].content);
    expect(system).toMatch(/call_tool \{"name": <tool>, "arguments": \{…\}\}/);
    const listed = JSON.parse(system.slice(system.indexOf('[{')));
    expect(listed.map((t: { name: string }) => t.name)).toEqual([
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    expect(listed[0].parameters.required).toEqual(['path']);
    expect(model.toolMessages(1).s1).not.toMatch(/^Error/);
  });

  it('refuses an unknown exposure naming the valid ones; native is the agent’s default without TOOL_EXPOSURE', async () => {
    const model = new ScriptedModel([answer('native')]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const bad = await run(stack, { goal: 'x', exposure: 'cached' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/exposure: Invalid option: expected one of "auto"\|"native"\|"dispatch"/);
    const ok = await run(stack, { goal: 'x' });
    expect(ok.body.status).toBe('completed');
    expect(model.toolNames()).toEqual([['manage_toolsets']]);
  });

  it('TOOL_EXPOSURE sets the agent’s default, and a request may still ask for native', async () => {
    expect(loadConfig({ TOOL_EXPOSURE: 'dispatch' }).agent.exposure).toBe('dispatch');
    expect(loadConfig({}).agent.exposure).toBe('auto');
    expect(() => loadConfig({ TOOL_EXPOSURE: 'fixed' })).toThrow(
      /TOOL_EXPOSURE: must be auto, native, dispatch or code/,
    );

    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] })),
      answer('dispatch by default'),
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] })),
      answer('native when asked'),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const store = createTaskStore(openDatabase(path.join(stack.dataDir, 'agent-dispatch.db')));
    retain(store);
    const agent = createAgent({
      store,
      gateway: createGatewayClient({ baseUrl: 'http://gateway', fetch: fetchOf(stack.gatewayApp) }),
      model,
      modelName: 'test-model',
      defaultMaxSteps: 5,
      log,
      exposure: 'dispatch',
      prime: false,
    });
    expect((await agent.execute({ goal: 'default' })).status).toBe('completed');
    expect((await agent.execute({ goal: 'native', exposure: 'native' })).status).toBe('completed');
    expect(model.toolNames()).toEqual([
      ['manage_toolsets', 'call_tool'],
      ['manage_toolsets', 'call_tool'],
      ['manage_toolsets'],
      ['manage_toolsets', 'read_text_file', 'list_directory', 'search_files'],
    ]);
    await store.close();
  });
});

describe('the task’s tool list between steps', () => {
  it('follows a toolset the operator disables mid-task: the refused call makes the next request list again', async () => {
    let s: Stack | undefined;
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read', 'fs_write'] }, 'o1')),
      async () => {
        // The operator disables fs_write between two steps of the task.
        await s?.post(s.gatewayApp, '/mcp/admin/toolsets', { action: 'DISABLE', toolset_ids: ['fs_write'] });
        return calls(call('write_file', { path: 'w.txt', content: 'w' }, 'o2'));
      },
      answer('fs_write went away'),
    ]);
    s = stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await run(stack, { goal: 'operator steps in' });
    expect(res.body.status).toBe('completed');
    expect(model.toolMessages(2).o2).toBe(
      'Error: Tool write_file belongs to toolset fs_write, which the operator has disabled',
    );
    expect(model.toolNames()[2]).toEqual([
      'manage_toolsets',
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    expect(await exists(path.join(stack.root, 'w.txt'))).toBe(false);
  });

  it('a manage_toolsets change answers with the session’s new tool list', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const changed = await stack.post(stack.gatewayApp, '/mcp/manage_toolsets', {
      session_id: 'ses_list',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_read'] },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.tools.map((t: { name: string }) => t.name)).toEqual([
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    const listed = await stack.post(stack.gatewayApp, '/mcp/manage_toolsets', {
      session_id: 'ses_list',
      arguments: { action: 'LIST', toolset_ids: [] },
    });
    expect(listed.body.tools).toBeUndefined();
  });
});
