import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createGatewayClient } from '../../../agent-server/clients/gateway.ts';
import type { ModelReply, ModelRequest } from '../../../agent-server/clients/model.ts';
import { ModelError } from '../../../agent-server/errors.ts';
import { createTaskStore } from '../../../agent-server/store/store.ts';
import { createAgent } from '../../../agent-server/tasks/agent.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { createTokenCounter } from '../../../lib/telemetry/tokens.ts';
import { manageToolsetsDefinition } from '../../../mcp-gateway/contract.ts';
import { createGateway } from '../../../mcp-gateway/core/gateway.ts';
import { createGatewayStore } from '../../../mcp-gateway/store/store.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { log, makeStack, retain, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const FS_TOOLS = [
  'list_allowed_directories',
  'read_text_file',
  'read_multiple_files',
  'write_file',
  'edit_file',
  'create_directory',
  'list_directory',
  'list_directory_with_sizes',
  'directory_tree',
  'search_files',
  'get_file_info',
  'move_file',
  'delete_file',
  'delete_directory',
];

/** The file tools as one toolset, written here so these tests do not follow edits to the repo's toolsets/. */
const FS_TOOLSET = {
  'file_system_tools.yaml': `id: file_system_tools
description: Read, write, edit, search and organise files under the allowed directories.
tools: [${FS_TOOLS.join(', ')}]
`,
};

/** The stack with the file tools as one toolset, unless other toolsets are given. */
function stackWith(opts: Parameters<typeof makeStack>[0] = {}) {
  return makeStack({ toolsets: FS_TOOLSET, ...opts });
}

async function execute(s: Stack, body: Record<string, unknown>) {
  return s.post(s.agentApp, '/agent/execute_task', body);
}

describe('the agent loop', () => {
  it('activates a toolset, uses it, deactivates it and answers; each request carries exactly the active tools', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }, 'c1')),
      calls(call('write_file', { path: 'notes/hello.txt', content: 'hi there\n' }, 'c2')),
      calls(call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['file_system_tools'] }, 'c3')),
      answer('Wrote notes/hello.txt.'),
    ]);
    stack = await stackWith({ model });
    const res = await execute(stack, { goal: 'write hello' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'completed',
      final_answer: 'Wrote notes/hello.txt.',
      steps: 4,
      toolsets_used: ['file_system_tools'],
      usage: { total_tokens: 60 },
    });
    expect(model.toolNames()).toEqual([
      ['manage_toolsets'],
      ['manage_toolsets', ...FS_TOOLS],
      ['manage_toolsets', ...FS_TOOLS],
      ['manage_toolsets'],
    ]);
    const activation = JSON.parse(model.toolMessages(1).c1);
    expect(activation.active_toolsets).toEqual(['file_system_tools']);
    expect(activation.added_tools).toEqual(FS_TOOLS);
    expect(activation.message).toMatch(/Activated file_system_tools\. New tools: list_allowed_directories/);
    const deactivation = JSON.parse(model.toolMessages(3).c3);
    expect(deactivation.removed_tools).toEqual(FS_TOOLS);
    expect(await readFile(path.join(stack.root, 'notes/hello.txt'), 'utf8')).toBe('hi there\n');
  });

  it('keeps the system prompt fixed and extends the previous request byte for byte when tools do not change', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
      calls(call('write_file', { path: 'a.txt', content: 'a' })),
      calls(call('read_text_file', { path: 'a.txt' })),
      answer('done'),
    ]);
    stack = await stackWith({ model });
    await execute(stack, { goal: 'go' });
    const [r0, r1, r2, r3] = model.requests;
    const system = r0.messages[0];
    expect(system.role).toBe('system');
    expect(String(system.content)).toMatch(
      /- file_system_tools: Read, write, edit, search .* \(14 tools: list_allowed_directories, read_text_file, .*, delete_directory\)/,
    );
    for (const r of [r1, r2, r3]) expect(r.messages[0]).toEqual(system);
    const prefix = (a: ModelRequest, b: ModelRequest) =>
      JSON.stringify({ tools: b.tools, messages: b.messages.slice(0, a.messages.length) }) ===
      JSON.stringify({ tools: a.tools, messages: a.messages });
    expect(prefix(r1, r2)).toBe(true);
    expect(prefix(r2, r3)).toBe(true);
    expect(prefix(r0, r1)).toBe(false); // the toolset change altered the tools
  });

  it('answers every parallel tool call of one reply, each with its own tool_call_id', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }, 'p0')),
      calls(
        call('write_file', { path: 'one.txt', content: '1' }, 'p1'),
        call('write_file', { path: 'two.txt', content: '22' }, 'p2'),
        call('list_directory', { path: '.' }, 'p3'),
      ),
      answer('ok'),
    ]);
    stack = await stackWith({ model });
    await execute(stack, { goal: 'parallel' });
    const msgs = model.toolMessages(2);
    expect(Object.keys(msgs)).toEqual(['p0', 'p1', 'p2', 'p3']);
    expect(JSON.parse(msgs.p1)).toMatchObject({ size_bytes: 1 });
    expect(JSON.parse(msgs.p2)).toMatchObject({ size_bytes: 2 });
    const listing = JSON.stringify(JSON.parse(msgs.p3));
    expect(listing).toContain('one.txt');
    expect(listing).toContain('two.txt');
  });

  it('turns each kind of bad call into an error tool message and goes on', async () => {
    const model = new ScriptedModel([
      calls(
        call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read', 'web_magic'] }, 'e1'),
        call('write_file', { path: 'x.txt', content: 'x' }, 'e2'),
        call('teleport', { to: 'mars' }, 'e3'),
        call('manage_toolsets', { action: 'EXPLODE', toolset_ids: [] }, 'e4'),
      ),
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'e5')),
      calls(
        call('write_file', '{"path": "x.txt", "content": ', 'e6'),
        call('write_file', { path: 'x.txt' }, 'e7'),
        call('write_file', { path: 'x.txt', content: 42 }, 'e8'),
        call('write_file', '[1,2]', 'e9'),
      ),
      answer('gave up politely'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS, autoActivate: false });
    const res = await execute(stack, { goal: 'misbehave' });
    expect(res.body.status).toBe('completed');
    const first = model.toolMessages(1);
    expect(first.e1).toBe('Error: Unknown toolset id(s): web_magic. Valid ids: fs_read, fs_write');
    expect(first.e2).toBe(
      'Error: Tool write_file belongs to toolset fs_write, which is not active in this session; activate fs_write first',
    );
    expect(first.e3).toBe(
      'Error: Unknown tool teleport. Tools active in this session: none (activate a toolset first)',
    );
    expect(first.e4).toMatch(/^Error: Invalid arguments for manage_toolsets: action: Invalid option/);
    const later = model.toolMessages(3);
    expect(later.e6).toMatch(/^Error: the arguments of write_file are not valid JSON/);
    expect(later.e7).toMatch(
      /^Error: Invalid arguments for write_file: missing required property 'content'\. Expected/,
    );
    expect(later.e8).toMatch(/^Error: Invalid arguments for write_file: content must be string/);
    expect(later.e9).toBe('Error: the arguments of write_file must be a JSON object, not [1,2]');
    // The unknown id made the whole activation fail, so fs_read is not active.
    expect(model.toolNames()[1]).toEqual(['manage_toolsets']);
  });

  it('accepts arguments sent as an object, and answers a misspelt tool name with the active tools', async () => {
    const objectArgs = call('manage_toolsets', {}, 'o1');
    (objectArgs.function as { arguments: unknown }).arguments = {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
    };
    const model = new ScriptedModel([
      calls(
        objectArgs,
        call('fs_read.read_text_file', { path: 'x' }, 'o2'),
        call('Read_Text_File', {}, 'o3'),
      ),
      answer('ok'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await execute(stack, { goal: 'odd calls' });
    expect(res.body.status).toBe('completed');
    const msgs = model.toolMessages(1);
    expect(JSON.parse(msgs.o1).active_toolsets).toEqual(['fs_read']);
    const active = 'Tools active in this session: read_text_file, list_directory, search_files';
    expect(msgs.o2).toBe(`Error: Unknown tool fs_read.read_text_file. ${active}`);
    expect(msgs.o3).toBe(`Error: Unknown tool Read_Text_File. ${active}`);
  });

  it('lists the catalog for the model, filtered by a query', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [], query: 'edit files' }, 'l1')),
      calls(call('manage_toolsets', { action: 'list' }, 'l2')),
      answer('listed'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    await execute(stack, { goal: 'what can you do' });
    const filtered = JSON.parse(model.toolMessages(1).l1);
    expect(filtered.toolsets[0]).toMatchObject({ id: 'fs_write', active: false });
    const all = JSON.parse(model.toolMessages(2).l2);
    expect(all.toolsets.map((t: { id: string }) => t.id)).toEqual(['fs_read', 'fs_write']);
    expect(all.toolsets[0].tools).toEqual(['read_text_file', 'list_directory', 'search_files']);
  });

  it('stops a looping task at max_steps', async () => {
    const loop = () => calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] }));
    const model = new ScriptedModel([loop, loop, loop, loop]);
    stack = await stackWith({ model });
    const res = await execute(stack, { goal: 'loop forever', max_steps: 3 });
    expect(res.body).toMatchObject({ status: 'max_steps', steps: 3, final_answer: null });
    expect(res.body.error).toMatch(/max_steps \(3\)/);
    expect(model.requests).toHaveLength(3);
  });

  it('runs two concurrent tasks without either seeing the other’s activations', async () => {
    let releaseB: () => void = () => {};
    const bMayGo = new Promise<void>((r) => {
      releaseB = r;
    });
    let aActivated: () => void = () => {};
    const aDone = new Promise<void>((r) => {
      aActivated = r;
    });
    const requests: Record<string, ModelRequest[]> = { A: [], B: [] };
    const script: Record<string, ((r: ModelRequest) => Promise<ModelReply>)[]> = {
      A: [
        async () =>
          calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
        async () => {
          aActivated();
          await bMayGo;
          return calls(call('write_file', { path: 'a.txt', content: 'from A' }));
        },
        async () => answer('A done'),
      ],
      B: [
        async () => {
          await aDone;
          return calls(call('write_file', { path: 'b.txt', content: 'from B' }, 'b1'));
        },
        async () => {
          releaseB();
          return answer('B done');
        },
      ],
    };
    const model = {
      async complete(request: ModelRequest) {
        const who = String(request.messages[1].content) === 'task A' ? 'A' : 'B';
        requests[who].push(structuredClone(request));
        return script[who][requests[who].length - 1](request);
      },
    };
    stack = await stackWith({ model, autoActivate: false });
    const [a, b] = await Promise.all([
      execute(stack, { goal: 'task A' }),
      execute(stack, { goal: 'task B' }),
    ]);
    expect(a.body.status).toBe('completed');
    expect(b.body.status).toBe('completed');
    expect(a.body.session_id).not.toBe(b.body.session_id);
    expect(requests.A[1].tools).toHaveLength(15);
    for (const r of requests.B)
      expect(r.tools.map((t) => (t.type === 'function' ? t.function.name : ''))).toEqual(['manage_toolsets']);
    const bTool = requests.B[1].messages.find((m) => m.role === 'tool');
    expect(String(bTool?.content)).toMatch(/file_system_tools, which is not active in this session/);
    await expect(readFile(path.join(stack.root, 'b.txt'))).rejects.toThrow(/ENOENT/);
    expect(await readFile(path.join(stack.root, 'a.txt'), 'utf8')).toBe('from A');
  });

  it('continues a session: toolsets activated by one task are active in the next task of that session', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] })),
      answer('activated'),
      answer('still here'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const first = await execute(stack, { goal: 'one' });
    const second = await execute(stack, { goal: 'two', session_id: first.body.session_id });
    expect(second.body.session_id).toBe(first.body.session_id);
    expect(model.toolNames()[2]).toEqual([
      'manage_toolsets',
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
  });
});

describe('tool-definition tokens', () => {
  it('counts as o200k_base does: text exactly, a tool as its JSON, a long unbroken run within a token per cut', () => {
    const counter = createTokenCounter();
    const require = createRequire(import.meta.url);
    const { Tiktoken } = require('js-tiktoken/lite') as typeof import('js-tiktoken/lite');
    const enc = new Tiktoken(require('js-tiktoken/ranks/o200k_base'));
    const prose = 'Read, write, edit, search and organise files under the allowed directories. '.repeat(20);
    expect(counter.text(prose)).toBe(enc.encode(prose).length);
    const tool = {
      name: 'write_file',
      description: 'Write a file.',
      parameters: { type: 'object', properties: {} },
    };
    expect(counter.tool(tool)).toBe(enc.encode(JSON.stringify({ type: 'function', function: tool })).length);
    expect(counter.tools([tool, tool])).toBe(2 * counter.tool(tool));
    const run = 'x'.repeat(2000);
    const exact = enc.encode(run).length;
    expect(Math.abs(counter.text(run) - exact)).toBeLessThanOrEqual(Math.ceil(2000 / 64));
    expect(counter.text('<|endoftext|> is text here')).toBeGreaterThan(0);
  });

  it('tells the model what a toolset change did to the tool-definition tokens, counted as the agent counts requests', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] }, 't1')),
      calls(call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['fs_read'] }, 't2')),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await execute(stack, { goal: 'tokens' });
    const counter = createTokenCounter();
    const meta = counter.tool(manageToolsetsDefinition);
    const activated = JSON.parse(model.toolMessages(1).t1);
    const deactivated = JSON.parse(model.toolMessages(2).t2);
    const fsRead = activated.tool_definition_tokens.change;
    expect(fsRead).toBeGreaterThan(100);
    expect(activated.tool_definition_tokens).toEqual({
      change: fsRead,
      total: meta + fsRead,
      tokenizer: 'o200k_base',
    });
    expect(activated.message).toMatch(
      new RegExp(
        `Tool definitions: \\+${fsRead.toLocaleString('en-US')} tokens, ${(meta + fsRead).toLocaleString('en-US')} in all\\.$`,
      ),
    );
    expect(deactivated.tool_definition_tokens).toMatchObject({ change: -fsRead, total: meta });
    expect(deactivated.message).toMatch(/Tool definitions: −\d[\d,]* tokens/);
    // The agent counts the request it sends with the same tokenizer: the gateway's total is what it sent.
    const task = await stack.get(stack.agentApp, `/agent/tasks/${res.body.task_id}`);
    const requests = task.body.events.filter((e: { type: string }) => e.type === 'model_request');
    expect(requests.map((e: { data: { tool_tokens: number } }) => e.data.tool_tokens)).toEqual([
      meta,
      meta + fsRead,
      meta,
    ]);
    const change = task.body.events.find((e: { type: string }) => e.type === 'toolset_change');
    expect(change.data.tool_definition_tokens).toMatchObject({ change: fsRead });
    // With every toolset loaded each of the three requests would have carried fs_read and fs_write too.
    const listing = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets');
    const all =
      meta +
      listing.body.toolsets.reduce(
        (n: number, t: { definition_tokens: number }) => n + t.definition_tokens,
        0,
      );
    expect(listing.body.toolsets[0].definition_tokens).toBe(fsRead);
    expect(res.body.tokens).toMatchObject({
      requests: 3,
      tool_definition_tokens: 3 * meta + fsRead,
      all_toolsets_tool_tokens: 3 * all,
    });
  });

  it('refuses an activation over TOOL_TOKEN_BUDGET, naming what to deactivate to fit, and audits it', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const store = createGatewayStore(openDatabase(path.join(stack.tmp, 'budget.db')));
    retain(store);
    const counter = createTokenCounter();
    const meta = counter.tool(manageToolsetsDefinition);
    const tokensOf = async (id: string) =>
      (await stack?.get(stack.gatewayApp, '/mcp/admin/toolsets'))?.body.toolsets.find(
        (t: { id: string }) => t.id === id,
      ).definition_tokens as number;
    const [fsRead, fsWrite] = [await tokensOf('fs_read'), await tokensOf('fs_write')];
    // Room for the meta-tool and either toolset, not both.
    const budget = meta + Math.max(fsRead, fsWrite) + 10;
    const gateway = createGateway({
      catalog: stack.catalog,
      store,
      log,
      toolTokenBudget: budget,
      ceiling: stack.ceiling,
    });
    const first = await gateway.manageToolsets('b1', { action: 'ACTIVATE', toolset_ids: ['fs_read'] });
    expect(first.result.tool_definition_tokens).toEqual({
      change: fsRead,
      total: meta + fsRead,
      budget,
      tokenizer: 'o200k_base',
    });
    const refused = await gateway
      .manageToolsets('b1', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })
      .catch((e) => e);
    expect(refused.code).toBe('over_budget');
    const n = (x: number) => x.toLocaleString('en-US');
    expect(refused.message).toBe(
      `Activating fs_write would bring the tool definitions to ${n(meta + fsRead + fsWrite)} tokens, over ` +
        `TOOL_TOKEN_BUDGET (${n(budget)}). Deactivate fs_read (${n(fsRead)} tokens) first, then activate fs_write.`,
    );
    expect((await gateway.tools('b1')).map((t) => t.toolset)).toEqual(['fs_read', 'fs_read', 'fs_read']);
    await gateway.manageToolsets('b1', { action: 'DEACTIVATE', toolset_ids: ['fs_read'] });
    const fits = await gateway.manageToolsets('b1', { action: 'ACTIVATE', toolset_ids: ['fs_write'] });
    expect(fits.change?.active_toolsets).toEqual(['fs_write']);
    const tiny = createGateway({
      catalog: stack.catalog,
      store,
      log,
      toolTokenBudget: meta + 1,
      ceiling: stack.ceiling,
    });
    const alone = await tiny
      .manageToolsets('b2', { action: 'ACTIVATE', toolset_ids: ['fs_read'] })
      .catch((e) => e);
    expect(alone.message).toBe(
      `fs_read alone would bring the tool definitions to ${n(meta + fsRead)} tokens, over TOOL_TOKEN_BUDGET ` +
        `(${n(meta + 1)}): it cannot be activated.`,
    );
    await store.flush();
    const db = new Database(path.join(stack.tmp, 'budget.db'), { readonly: true });
    retain(db);
    const audit = db
      .prepare<[], { subject: string; detail: string }>(
        'SELECT subject, detail FROM audit WHERE ok = 0 ORDER BY id',
      )
      .all();
    db.close();
    expect(audit.map((a) => a.subject)).toEqual(['fs_write', 'fs_read']);
    expect(audit[0].detail).toMatch(/^over budget: Activating fs_write/);
  });

  it('judges parallel activations in one session one after the other, so together they stay within the budget', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const store = createGatewayStore(openDatabase(path.join(stack.tmp, 'parallel.db')));
    retain(store);
    const meta = createTokenCounter().tool(manageToolsetsDefinition);
    const listing = (await stack.get(stack.gatewayApp, '/mcp/admin/toolsets')).body.toolsets as {
      id: string;
      definition_tokens: number;
    }[];
    const cost = (id: string) => listing.find((t) => t.id === id)?.definition_tokens as number;
    const budget = meta + Math.max(cost('fs_read'), cost('fs_write')) + 10;
    const gateway = createGateway({
      catalog: stack.catalog,
      store,
      log,
      toolTokenBudget: budget,
      ceiling: stack.ceiling,
    });
    // Each fits alone; both do not. Sent at once, as a model's parallel tool calls (or two MCP clients) do.
    const outcomes = await Promise.allSettled([
      gateway.manageToolsets('p', { action: 'ACTIVATE', toolset_ids: ['fs_read'] }),
      gateway.manageToolsets('p', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    const active = [...new Set((await gateway.tools('p')).map((t) => t.toolset))];
    expect(active).toHaveLength(1);
    expect(meta + cost(active[0])).toBeLessThanOrEqual(budget);
  });
});

describe('the agent API', () => {
  it('answers 503 naming the variables to set when no model is configured; the rest still works', async () => {
    stack = await stackWith();
    const res = await execute(stack, { goal: 'anything' });
    expect(res.status).toBe(503);
    expect(res.body.error).toMatch(/set OPENAI_API_KEY .* or OPENAI_BASE_URL/);
    expect((await stack.get(stack.agentApp, '/health')).body).toEqual({
      status: 'ok',
      model_configured: false,
    });
    expect((await stack.get(stack.agentApp, '/agent/tasks')).body).toEqual({ tasks: [] });
  });

  it('validates the task request', async () => {
    stack = await stackWith({ model: new ScriptedModel([]) });
    const empty = await execute(stack, { goal: '  ' });
    expect(empty.status).toBe(400);
    expect(empty.body.error).toMatch(/goal: must not be empty/);
    const steps = await execute(stack, { goal: 'x', max_steps: 0 });
    expect(steps.body.error).toMatch(/max_steps: Too small/);
  });

  it('fails the task with the provider’s message when the model call fails', async () => {
    const model = {
      async complete(): Promise<ModelReply> {
        throw new ModelError('Model call failed: model endpoint answered 400: 400 context length exceeded');
      },
    };
    stack = await stackWith({ model });
    const res = await execute(stack, { goal: 'x' });
    expect(res.body).toMatchObject({ status: 'failed', final_answer: null });
    expect(res.body.error).toMatch(/context length exceeded/);
  });

  it('fails the task with a clear message when the gateway cannot be reached', async () => {
    stack = await stackWith();
    const store = createTaskStore(openDatabase(path.join(stack.tmp, 'lonely.db')));
    retain(store);
    const agent = createAgent({
      store,
      gateway: createGatewayClient({
        baseUrl: 'http://gateway.invalid',
        fetch: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:8080')),
      }),
      model: new ScriptedModel([answer('never asked')]),
      modelName: 'm',
      defaultMaxSteps: 5,
      log,
      // Not a restart's few seconds: it is given up on at once here (30 s by default).
      gatewayAwayMs: 0,
    });
    const result = await agent.execute({ goal: 'x' });
    expect(result).toMatchObject({ status: 'failed', steps: 0 });
    expect(result.error).toBe(
      'Task failed: Cannot reach http://gateway.invalid/mcp/admin/toolsets?session_id=' +
        `${result.session_id}: connect ECONNREFUSED 127.0.0.1:8080`,
    );
    expect((await store.getTask(result.task_id))?.status).toBe('failed');
    await store.close();
  });

  it('keeps running a task whose SSE client went away, and records its end', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] })),
      async () => {
        await gate;
        return answer('finished alone');
      },
    ]);
    stack = await stackWith({ model });
    const res = await stack.agentApp.request('/agent/execute_task', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ goal: 'walk away' }),
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const taskId = /"task_id":"(task_[^"]+)"/.exec(first)?.[1] ?? '';
    await reader.cancel();
    release();
    let task: { body: { status: string; final_answer: string } } | undefined;
    for (let i = 0; i < 100; i++) {
      task = await stack.get(stack.agentApp, `/agent/tasks/${taskId}`);
      if (task.body.status !== 'running') break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(task?.body).toMatchObject({ status: 'completed', final_answer: 'finished alone' });
  });

  it('records tasks with their events and keeps them across a restart', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
      calls(call('write_file', { path: 'kept.txt', content: 'k' })),
      answer('kept'),
    ]);
    stack = await stackWith({ model });
    const done = await execute(stack, { goal: 'remember me' });
    const dataDir = stack.dataDir;
    await stack.close(true);
    stack = await stackWith({ dataDir });
    const task = await stack.get(stack.agentApp, `/agent/tasks/${done.body.task_id}`);
    expect(task.status).toBe(200);
    expect(task.body).toMatchObject({
      status: 'completed',
      final_answer: 'kept',
      goal: 'remember me',
      steps: 3,
    });
    expect(task.body.events.map((e: { type: string }) => e.type)).toEqual([
      'task_started',
      'model_request',
      'model_call',
      'tool_call_started',
      'toolset_change',
      'model_request',
      'model_call',
      'tool_call_started',
      'tool_call',
      'model_request',
      'model_call',
      'task_finished',
    ]);
    expect(task.body.events[8].data).toMatchObject({ name: 'write_file', ok: true });
    expect(task.body.tokens).toMatchObject({ tokenizer: 'o200k_base', requests: 3 });
    const list = await stack.get(stack.agentApp, '/agent/tasks');
    expect(list.body.tasks[0].task_id).toBe(done.body.task_id);
    const missing = await stack.get(stack.agentApp, '/agent/tasks/task_nope');
    expect(missing.status).toBe(404);
  });

  it('streams the task’s events over SSE and ends with the result', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
      answer('streamed'),
    ]);
    stack = await stackWith({ model });
    const res = await stack.agentApp.request('/agent/execute_task', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ goal: 'stream it' }),
    });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const text = await res.text();
    const names = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    expect(names).toEqual([
      'task_started',
      'model_request',
      'model_call',
      'tool_call_started',
      'toolset_change',
      'model_request',
      'model_call',
      'task_finished',
      'result',
    ]);
    const last =
      text
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .pop() ?? '';
    expect(JSON.parse(last.slice(6))).toMatchObject({ status: 'completed', final_answer: 'streamed' });
  });
});
