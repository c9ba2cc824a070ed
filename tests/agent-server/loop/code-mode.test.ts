import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// TOOL_EXPOSURE=code and `exposure: "code"` per task: the tools array stays [manage_toolsets, run_code], an
// activation declares its tools in TypeScript, and a script's calls go through the gateway one
// by one — judged, audited as the script's, each an event of its own — while only the script's output comes back.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

type Event = { type: string; data: Record<string, unknown> };

async function events(s: Stack, taskId: string): Promise<Event[]> {
  return (await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body.events;
}

const TOTAL = `
for (const [name, n] of [['a', 3], ['b', 4], ['c', 5]]) {
  await write_file({ path: \`orders/\${name}.txt\`, content: String(n) });
}
await list_directory({ path: 'orders' });
let total = 0;
for (const name of ['a', 'b', 'c']) total += Number((await read_text_file({ path: \`orders/\${name}.txt\` })).content);
console.log('total', total);
return total;
`;

describe('code exposure', () => {
  it('runs a script against the active tools, returning only its output, each call an event and an audit row', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read', 'fs_write'] }, 'c1')),
      calls(call('run_code', { code: TOTAL }, 'c2')),
      answer('The total is 12.'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'total', exposure: 'code' });
    expect(res.body).toMatchObject({ status: 'completed', final_answer: 'The total is 12.' });
    expect(res.body.toolsets_used.sort()).toEqual(['fs_read', 'fs_write']);
    expect(model.toolNames()).toEqual(Array(3).fill(['manage_toolsets', 'run_code']));

    // The gateway's result as JSON, then the new tools' declarations as TypeScript text.
    const [json, declarations] = model.toolMessages(1).c1.split('\n\n');
    expect(JSON.parse(json)).toMatchObject({ active_toolsets: ['fs_read', 'fs_write'] });
    expect(declarations).toMatch(/^\/\/ toolset fs_read\n/);
    expect(declarations).toMatch(
      /declare function read_text_file\(args: \{[\s\S]*path: string;[\s\S]*\}\): Promise<\{ path: string;/,
    );
    expect(declarations).toMatch(/declare function write_file\(args: /);
    expect(declarations).not.toMatch(/Returns \{/);

    const result = model.toolMessages(2).c2;
    expect(result).toBe(
      'total 12\nreturned: 12\n[run_code: 7 calls: write_file ×3, list_directory, read_text_file ×3]',
    );
    expect(await readFile(path.join(stack.root, 'orders/b.txt'), 'utf8')).toBe('4');

    const seen = await events(stack, res.body.task_id);
    const started = seen.find((e) => e.type === 'tool_call_started' && e.data.tool_call_id === 'c2');
    expect(started?.data).toMatchObject({ name: 'run_code', script: TOTAL });
    const inner = seen.filter((e) => e.type === 'tool_call' && e.data.in_script === 'c2');
    expect(inner.map((e) => [e.data.tool_call_id, e.data.name, e.data.ok])).toEqual([
      ['c2#1', 'write_file', true],
      ['c2#2', 'write_file', true],
      ['c2#3', 'write_file', true],
      ['c2#4', 'list_directory', true],
      ['c2#5', 'read_text_file', true],
      ['c2#6', 'read_text_file', true],
      ['c2#7', 'read_text_file', true],
    ]);
    expect(inner[4].data).toMatchObject({ toolset: 'fs_read', arguments: { path: 'orders/a.txt' } });
    const outer = seen.find((e) => e.type === 'tool_call' && e.data.tool_call_id === 'c2');
    expect(outer?.data).toMatchObject({ name: 'run_code', ok: true, output: result });

    const audit = await stack.get(stack.gatewayApp, `/mcp/admin/audit?task_id=${res.body.task_id}`);
    const calledBy = audit.body.audit
      .filter((r: { kind: string }) => r.kind === 'call')
      .map((r: { subject: string; actor: string }) => `${r.subject} ${r.actor}`);
    expect(calledBy).toHaveLength(7);
    for (const row of calledBy) expect(row).toMatch(/ model in task \S+ \(run_code\)$/);
  });

  it('withdraws a deactivated toolset’s declarations from later requests, and shows them again on its return', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read', 'fs_write'] }, 'w1')),
      calls(call('manage_toolsets', { action: 'DEACTIVATE', toolset_ids: ['fs_write'] }, 'w2')),
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'w3')),
      answer('ok'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'toggle', exposure: 'code' });
    expect(res.body.status).toBe('completed');
    const first = (i: number) => model.toolMessages(i).w1;
    expect(first(1)).toMatch(/\/\/ toolset fs_write\n[\s\S]*declare function write_file\(/);
    // Deactivated: its declarations are gone from the request, fs_read's stay.
    expect(first(2)).toMatch(/\/\/ toolset fs_write: deactivated, its declarations withdrawn$/);
    expect(first(2)).toMatch(/declare function read_text_file\(/);
    expect(first(2)).not.toMatch(/write_file\(/);
    // Back: where they were, byte for byte, and not declared a second time.
    expect(first(3)).toBe(first(1));
    expect(model.toolMessages(3).w3).not.toMatch(/declare function/);
    expect(JSON.parse(model.toolMessages(3).w3).also_usable).toEqual([
      'read_text_file',
      'list_directory',
      'search_files',
      'write_file',
      'edit_file',
      'delete_file',
    ]);
  });

  it('refuses inactive, unknown and direct calls clearly; run_code {tool} runs one tool', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] }, 'e1')),
      calls(
        call('run_code', { code: "await write_file({ path: 'x.txt', content: 'no' })" }, 'e2'),
        call('run_code', { code: "await read_text_file({ path: 'nope.txt' })" }, 'e3'),
        call('run_code', { code: "const n: number = 1;\nawait tools['no_such_tool']({ n })" }, 'e4'),
        call('run_code', { code: 'return 1', extra: true }, 'e5'),
        call('read_text_file', { path: 'x.txt' }, 'e6'),
        call('run_code', { tool: 'list_directory', arguments: { path: '.' } }, 'e7'),
        call('run_code', { tool: 'run_code', arguments: { code: 'return 1' } }, 'e8'),
        call('call_tool', { name: 'list_directory', arguments: { path: '.' } }, 'e9'),
      ),
      answer('done'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'errors', exposure: 'code' });
    expect(res.body.status).toBe('completed');
    const m = model.toolMessages(2);
    // write_file is not even a function in the script: fs_write is not active.
    expect(m.e2).toMatch(/^Error: ReferenceError: 'write_file' is not defined \(script line 1\)/);
    expect(m.e3).toMatch(/^Error: Error: .*nope\.txt/);
    expect(m.e3).toMatch(/\[run_code: 1 call: read_text_file\]$/);
    // Type annotations are stripped; an unknown tool is not in `tools`.
    expect(m.e4).toMatch(/^Error: TypeError: not a function \(script line 2\)/);
    expect(m.e5).toBe(
      'Error: run_code takes {code} (a script) or {tool, arguments} (one call); remove extra',
    );
    expect(m.e6).toMatch(/read_text_file is not offered directly in this task; call it in a run_code script/);
    expect(JSON.parse(m.e7)).toHaveProperty('entries');
    expect(m.e8).toMatch(/run_code’s `tool` names one tool of an active toolset/);
    expect(m.e9).toMatch(/call_tool is not offered directly in this task/);
    await expect(stack.root).toBeTruthy();
  });

  it('a toolset the operator disables while a script runs: its next call is refused, the script hears why', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'd1')),
      calls(
        call(
          'run_code',
          {
            code:
              "await write_file({ path: 'one.txt', content: '1' });\n" +
              "try { await write_file({ path: 'two.txt', content: '2' }) } catch (e) { print('refused:', e.message) }",
          },
          'd2',
        ),
      ),
      answer('done'),
    ]);
    let writes = 0;
    let s: Stack | undefined;
    // Between the script's two calls, the operator disables fs_write.
    const intercept = async (request: Request, next: () => Promise<Response>) => {
      if (request.url.includes('/mcp/tools/write_file/call') && ++writes === 2 && s)
        await s.post(s.gatewayApp, '/mcp/admin/toolsets', { action: 'DISABLE', toolset_ids: ['fs_write'] });
      return next();
    };
    s = stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS, interceptGateway: intercept });
    const res = await s.post(s.agentApp, '/agent/execute_task', { goal: 'disable', exposure: 'code' });
    expect(res.body.status).toBe('completed');
    expect(model.toolMessages(2).d2).toMatch(/^refused: .*fs_write.*disabled/m);
    expect(await readFile(path.join(s.root, 'one.txt'), 'utf8')).toBe('1');
    await expect(readFile(path.join(s.root, 'two.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses a tool the policy asks about inside a script, then waits for a human when it is called alone', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'p1')),
      calls(call('run_code', { code: "await write_file({ path: 'asked.txt', content: 'x' })" }, 'p2')),
      calls(call('run_code', { tool: 'write_file', arguments: { path: 'asked.txt', content: 'x' } }, 'p3')),
      answer('Written once approved.'),
    ]);
    stack = await makeStack({
      model,
      toolsets: SPLIT_TOOLSETS,
      policy: 'rules:\n  - { tool: write_file, decision: ask }\n',
    });
    const s = stack;
    const started = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'ask',
      exposure: 'code',
      wait: false,
    });
    const taskId = started.body.task_id as string;
    await expect
      .poll(async () => (await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body.status, { timeout: 10_000 })
      .toBe('awaiting_approval');
    expect(model.toolMessages(2).p2).toMatch(
      /write_file needs a human's approval .* cannot wait for one: call it alone, outside a script \(run_code \{"tool": "write_file"/,
    );
    // The script asked for no approval: the one pending is the lone call's.
    const pending = (await s.get(s.agentApp, '/agent/approvals')).body.approvals;
    expect(pending).toHaveLength(1);
    expect(pending[0]).toMatchObject({ call_id: 'p3', subject: 'write_file' });
    await expect(readFile(path.join(s.root, 'asked.txt'))).rejects.toThrow(/ENOENT/);
    expect((await s.post(s.agentApp, `/agent/tasks/${taskId}/approvals/p3`, { approve: true })).status).toBe(
      200,
    );
    await expect
      .poll(async () => (await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body.status, { timeout: 10_000 })
      .toBe('completed');
    expect(await readFile(path.join(s.root, 'asked.txt'), 'utf8')).toBe('x');
  });

  it('ends an endless script at its bound while another task runs to its end meanwhile', async () => {
    // In the order the requests come: the spinning task's first, the quick task's, the spinning task's second.
    const model = new ScriptedModel([
      calls(call('run_code', { code: 'for (;;) {}' }, 'l1')),
      answer('quick done'),
      async (req) => answer(String(req.messages.at(-1)?.content)),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const slow = await stack.post(stack.agentApp, '/agent/execute_task', {
      goal: 'spin',
      exposure: 'code',
      wait: false,
    });
    await expect
      .poll(async () =>
        (await events(stack as Stack, slow.body.task_id)).some((e) => e.type === 'tool_call_started'),
      )
      .toBe(true);
    const quick = await stack.post(stack.agentApp, '/agent/execute_task', {
      goal: 'quick',
      exposure: 'code',
    });
    expect(quick.body).toMatchObject({ status: 'completed', final_answer: 'quick done' });
    await expect
      .poll(
        async () => (await stack?.get(stack.agentApp, `/agent/tasks/${slow.body.task_id}`))?.body.status,
        {
          timeout: 30_000,
        },
      )
      .toBe('completed');
    const done = (await stack.get(stack.agentApp, `/agent/tasks/${slow.body.task_id}`)).body;
    expect(done.final_answer).toMatch(/^Error: the script ran longer than its 5000 ms of computing time/);
  }, 60_000);
});
