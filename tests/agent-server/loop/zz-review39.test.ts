import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { createTokenCounter } from '../../../lib/telemetry/tokens.ts';
import { manageToolsetsDefinition } from '../../../mcp-gateway/contract.ts';
import { createGateway } from '../../../mcp-gateway/core/gateway.ts';
import { createGatewayStore } from '../../../mcp-gateway/store/store.ts';
import { log, makeStack, retain, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

async function setup(budgetOf: (meta: number, tok: (ids: string[]) => number) => number) {
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
  const s = stack;
  const store = createGatewayStore(openDatabase(path.join(s.tmp, 'r39.db')));
  retain(store);
  const counter = createTokenCounter();
  const meta = counter.tool(manageToolsetsDefinition);
  const listed = (await s.get(s.gatewayApp, '/mcp/admin/toolsets')).body.toolsets as { id: string; definition_tokens: number }[];
  const tok = (ids: string[]) => ids.reduce((n, id) => n + (listed.find((t) => t.id === id)?.definition_tokens ?? 0), 0);
  const budget = budgetOf(meta, tok);
  const gateway = createGateway({ catalog: s.catalog, store, log, toolTokenBudget: budget, ceiling: s.ceiling });
  const total = async (sid: string) => meta + counter.tools((await gateway.tools(sid)).map((t) => ({ name: t.name, description: t.description, parameters: t.parameters })));
  return { s, gateway, budget, meta, tok, total };
}

describe('review 39', () => {
  it('A: widening a subset to the whole toolset skips TOOL_TOKEN_BUDGET', async () => {
    const { gateway, budget, total } = await setup((meta, tok) => meta + Math.floor(tok(['fs_write']) / 2));
    await expect(gateway.manageToolsets('w', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })).rejects.toMatchObject({ code: 'over_budget' });
    await gateway.manageToolsets('w', { action: 'ACTIVATE', toolset_ids: ['fs_write'], tools: ['delete_file'] });
    const res = await gateway.manageToolsets('w', { action: 'ACTIVATE', toolset_ids: ['fs_write'] });
    console.log('A widened', res.result.message, 'total', await total('w'), 'budget', budget);
    expect(await total('w')).toBeGreaterThan(budget);
  });

  it('B: an already-active full toolset named with tools is counted as a subset', async () => {
    const { gateway, budget, total } = await setup((meta, tok) => meta + tok(['fs_read']) + 40);
    await gateway.manageToolsets('b', { action: 'ACTIVATE', toolset_ids: ['fs_read'] });
    const res = await gateway.manageToolsets('b', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read', 'fs_write'],
      tools: ['list_directory', 'delete_file'],
    }).catch((e) => e);
    console.log('B', res.code ?? res.result?.message, 'total', await total('b'), 'budget', budget);
    expect(await total('b')).toBeGreaterThan(budget);
  });

  it('C: an auto-activation stays when the call is then refused (invalid args, fenced)', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    const bad = await s.post(s.gatewayApp, '/mcp/tools/write_file/call', { session_id: 'c1', arguments: { nope: 1 } });
    console.log('C invalid', bad.status, bad.body.code, bad.body.activated);
    const t1 = await s.get(s.gatewayApp, '/mcp/tools?session_id=c1');
    console.log('C tools after invalid', t1.body.tools.map((t: { name: string }) => t.name));
    await s.post(s.gatewayApp, '/mcp/tasks/task-9/fence', { fence: 4 });
    const late = await s.post(s.gatewayApp, '/mcp/tools/read_text_file/call', {
      session_id: 'c2', arguments: { path: 'x.txt' }, idempotency_key: 'k', fence: { task_id: 'task-9', fence: 3 },
    });
    console.log('C fenced', late.status, late.body.code);
    const t2 = await s.get(s.gatewayApp, '/mcp/tools?session_id=c2');
    console.log('C tools after fenced', t2.body.tools.map((t: { name: string }) => t.name));
    expect(t2.body.tools.length).toBeGreaterThan(0);
  });

  it('D: auto-activation widening a subset skips the budget', async () => {
    const { s, gateway, budget, total } = await setup((meta, tok) => meta + Math.floor(tok(['fs_write']) / 2));
    await writeFile(path.join(s.root, 'a.txt'), 'x');
    await gateway.manageToolsets('d', { action: 'ACTIVATE', toolset_ids: ['fs_write'], tools: ['delete_file'] });
    const r1 = await gateway.callTool('d', 'write_file', { path: 'a.txt', content: 'y' }, { activate: true });
    const r2 = await gateway.callTool('d', 'edit_file', { path: 'a.txt', edits: [{ old_text: 'y', new_text: 'z' }] }, { activate: true });
    console.log('D', r1.success, r2.success, 'total', await total('d'), 'budget', budget);
    expect(await total('d')).toBeGreaterThan(budget);
  });
});
