import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { createTokenCounter } from '../../../lib/telemetry/tokens.ts';
import { manageToolsetsDefinition } from '../../../mcp-gateway/contract.ts';
import { createGateway } from '../../../mcp-gateway/core/gateway.ts';
import { createGatewayStore } from '../../../mcp-gateway/store/store.ts';
import { log, makeStack, retain, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// What an activation of some tools, or one made for a call, may not get past: TOOL_TOKEN_BUDGET however the
// tools are named, and a call that is refused (fenced, bad arguments) still activating nothing or telling it.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** A gateway over the split toolsets with a budget made from the meta-tool's tokens and the toolsets'. */
async function withBudget(budgetOf: (meta: number, tokens: (id: string) => number) => number) {
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
  const s = stack;
  const store = createGatewayStore(openDatabase(path.join(s.tmp, 'bounds.db')));
  retain(store);
  const counter = createTokenCounter();
  const meta = counter.tool(manageToolsetsDefinition);
  const listed = (await s.get(s.gatewayApp, '/mcp/admin/toolsets')).body.toolsets as {
    id: string;
    definition_tokens: number;
  }[];
  const tokens = (id: string) => listed.find((t) => t.id === id)?.definition_tokens ?? 0;
  const budget = budgetOf(meta, tokens);
  const gateway = createGateway({
    catalog: s.catalog,
    store,
    log,
    toolTokenBudget: budget,
    ceiling: s.ceiling,
  });
  const total = async (sid: string) =>
    meta +
    counter.tools(
      (await gateway.tools(sid)).map((t) => ({
        name: t.name,
        description: t.description,
        parameters: t.parameters,
      })),
    );
  return { s, gateway, budget, total };
}

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => 'allowed',
    (err: { code?: string }) => err.code,
  );

describe('activation bounds', () => {
  it('refuses an empty tools list instead of counting it as nothing', async () => {
    const { gateway, total, budget } = await withBudget((meta) => meta + 10);
    const empty = gateway.manageToolsets('i', { action: 'ACTIVATE', toolset_ids: ['fs_write'], tools: [] });
    await expect(empty).rejects.toThrow(/tools: name at least one tool, or leave tools out/);
    expect(await total('i')).toBeLessThanOrEqual(budget);
  });

  it('holds TOOL_TOKEN_BUDGET when a toolset active in part is widened, by ACTIVATE or by a call', async () => {
    const { s, gateway, budget, total } = await withBudget(
      (meta, tokens) => meta + Math.floor(tokens('fs_write') / 2),
    );
    await gateway.manageToolsets('w', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      tools: ['delete_file'],
    });
    expect(
      await refusal(gateway.manageToolsets('w', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
    ).toBe('over_budget');
    await writeFile(path.join(s.root, 'a.txt'), 'x');
    const first = await gateway.callTool(
      'w',
      'write_file',
      { path: 'a.txt', content: 'y' },
      { activate: true },
    );
    expect(first.activated?.change?.added_tools).toEqual(['write_file']);
    const second = gateway.callTool(
      'w',
      'edit_file',
      { path: 'a.txt', edits: [{ old_text: 'y', new_text: 'z' }] },
      { activate: true },
    );
    await expect(second).rejects.toThrow(/not activated for this call: .*TOOL_TOKEN_BUDGET/);
    expect(await total('w')).toBeLessThanOrEqual(budget);
  });

  it('counts a toolset already active in full as whole when tools name it again', async () => {
    const { gateway, budget, total } = await withBudget((meta, tokens) => meta + tokens('fs_read') + 40);
    await gateway.manageToolsets('b', { action: 'ACTIVATE', toolset_ids: ['fs_read'] });
    const both = gateway.manageToolsets('b', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read', 'fs_write'],
      tools: ['list_directory', 'delete_file'],
    });
    expect(await refusal(both)).toBe('over_budget');
    expect(await total('b')).toBeLessThanOrEqual(budget);
  });

  it('activates nothing for a call that is fenced or has bad arguments, and tells a refused one what it did', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      policy: 'rules:\n  - { tool: edit_file, decision: deny }\n',
    });
    const s = stack;
    const toolsOf = async (sid: string) =>
      (await s.get(s.gatewayApp, `/mcp/tools?session_id=${sid}`)).body.tools.map(
        (t: { name: string }) => t.name,
      );
    const bad = await s.post(s.gatewayApp, '/mcp/tools/write_file/call', {
      session_id: 'c1',
      arguments: { nope: 1 },
    });
    expect(bad.body.code).toBe('invalid_arguments');
    expect(await toolsOf('c1')).toEqual([]);
    await s.post(s.gatewayApp, '/mcp/tasks/task-9/fence', { fence: 4 });
    const late = await s.post(s.gatewayApp, '/mcp/tools/read_text_file/call', {
      session_id: 'c2',
      arguments: { path: 'x.txt' },
      idempotency_key: 'k',
      fence: { task_id: 'task-9', fence: 3 },
    });
    expect(late.body.code).toBe('fenced');
    expect(await toolsOf('c2')).toEqual([]);
    // Denied by the policy once its toolset was activated for it: the refusal says what the activation did.
    const denied = await s.post(s.gatewayApp, '/mcp/tools/edit_file/call', {
      session_id: 'c3',
      arguments: { path: 'a.txt', edits: [{ old_text: 'a', new_text: 'b' }] },
    });
    expect(denied.body.code).toBe('denied');
    expect(denied.body.activated.change.added_tools).toEqual(['write_file', 'edit_file', 'delete_file']);
  });
});
