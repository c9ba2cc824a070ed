import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { REFUSAL_STATUS } from '../../../mcp-gateway/refusals.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// The gateway's rules refuse with a code (contract.ts RefusalCode); the REST routes answer each code with one
// status and put the code in the body, so the agent and other clients branch on meaning. The rules themselves
// know nothing of HTTP.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const POLICY = `
rules:
  - { tool: delete_file, decision: deny, reason: nothing is deleted here }
  - { tool: edit_file, decision: ask }
`;

describe('refusals', () => {
  it('travel over HTTP as a code in the body and the status of that code', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      policy: POLICY,
      limits: { callsPerMinute: 3 },
      autoActivate: false,
    });
    const s = stack;
    const call = (name: string, args: Record<string, unknown>, session = 's1') =>
      s.post(s.gatewayApp, `/mcp/tools/${name}/call`, { session_id: session, arguments: args });
    const change = (body: Record<string, unknown>) => s.post(s.gatewayApp, '/mcp/admin/toolsets', body);
    const seen: [string, number][] = [];
    const expectRefusal = (res: { status: number; body: { code?: string } }, code: string) => {
      expect(res.body.code).toBe(code);
      expect(res.status).toBe(REFUSAL_STATUS[code as keyof typeof REFUSAL_STATUS]);
      seen.push([code, res.status]);
    };

    expectRefusal(
      await change({ action: 'ACTIVATE', toolset_ids: ['nope'], session_id: 's1' }),
      'unknown_toolset',
    );
    expectRefusal(await call('write_file', { path: 'a.txt', content: 'x' }), 'inactive');
    expectRefusal(await call('no_such_tool', {}), 'unknown_tool');
    await change({ action: 'ACTIVATE', toolset_ids: ['fs_write'], session_id: 's1' });
    expectRefusal(await call('write_file', { path: 7 }), 'invalid_arguments');
    expectRefusal(await call('delete_file', { path: 'a.txt' }), 'denied');
    const asked = await call('edit_file', { path: 'a.txt', edits: [{ old_text: 'x', new_text: 'y' }] });
    expectRefusal(asked, 'approval_needed');
    expect(asked.body.approval).toMatchObject({ status: 'pending', subject: 'edit_file' });
    // The limit counts the calls that reach the policy: a few more writes pass it.
    let limited = await call('write_file', { path: 'b.txt', content: 'y' });
    for (let i = 0; i < 5 && limited.status === 200; i++)
      limited = await call('write_file', { path: 'b.txt', content: 'y' });
    expectRefusal(limited, 'rate_limited');
    const raw = await s.gatewayApp.request('/mcp/tools/write_file/call', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 's1', arguments: { path: 'b.txt', content: 'y' } }),
    });
    expect(raw.status).toBe(429);
    expect(raw.headers.get('retry-after')).toMatch(/^\d+$/);
    await change({ action: 'DISABLE', toolset_ids: ['fs_read'] });
    expectRefusal(
      await change({ action: 'ACTIVATE', toolset_ids: ['fs_read'], session_id: 's2' }),
      'disabled',
    );
    expectRefusal(await s.get(s.gatewayApp, '/mcp/admin/approvals/apr_missing'), 'not_found');
    expect(seen.map(([code]) => code)).toEqual([
      'unknown_toolset',
      'inactive',
      'unknown_tool',
      'invalid_arguments',
      'denied',
      'approval_needed',
      'rate_limited',
      'disabled',
      'not_found',
    ]);
  });

  it('are made by rules that know no HTTP', () => {
    for (const file of [
      'core/gateway.ts',
      'core/session-toolsets.ts',
      'core/change-toolsets.ts',
      'core/change-defaults.ts',
      'core/call-tool.ts',
      'core/operator.ts',
      'core/views.ts',
      'ceiling/ceiling.ts',
      'ceiling/limits.ts',
      'ceiling/require-approvals.ts',
      'core/manage-toolsets.ts',
      'catalog/catalog.ts',
      'catalog/catalog-state.ts',
      'catalog/catalog-changes.ts',
      'ceiling/policy.ts',
    ]) {
      const source = readFileSync(`mcp-gateway/${file}`, 'utf8');
      expect(source, file).not.toMatch(/HttpError|lib\/http\.ts|\b(?:4\d\d|5\d\d),\s/);
    }
  });
});
