import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../../client.ts';
import { NO_STORED_CREDENTIALS } from '../../helpers/credentials.ts';
import { asLoopback, makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// The audit trail searched as an operator asks (who, what kind, which toolset or tool, refused or not, when) and
// exported whole as JSON lines, through the gateway's API and `toolshift audit`. Runs on both stores (the
// `postgres` project runs it again with the gateway's state in PostgreSQL).

const TOKENS = { admin: 'adm-tok-search-1', agent: 'agt-tok-search-2', user: 'usr-tok-search-3' };
const as = (token: string) => ({ authorization: `Bearer ${token}` });

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** A stack whose session s1 activated fs_read and fs_write, wrote a file, and was refused one call. */
async function searched(): Promise<Stack> {
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
  const s = stack;
  const change = (action: string, ids: string[], session?: string) =>
    s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action, toolset_ids: ids, session_id: session },
      as(TOKENS.admin),
    );
  await change('ACTIVATE', ['fs_read', 'fs_write'], 's1');
  const call = (name: string, args: Record<string, unknown>) =>
    s.post(s.gatewayApp, `/mcp/tools/${name}/call`, { session_id: 's1', arguments: args }, as(TOKENS.agent));
  expect((await call('write_file', { path: 'a.txt', content: 'x' })).status).toBe(200);
  expect((await call('read_text_file', { path: 'a.txt' })).status).toBe(200);
  expect((await call('delete_file', { path: 7 })).status).toBe(400);
  await change('DISABLE', ['fs_write']);
  return s;
}

const rows = async (s: Stack, query: string) => {
  const res = await s.get(s.gatewayApp, `/mcp/admin/audit?${query}`, as(TOKENS.admin));
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body.audit as { kind: string; subject: string; ok: boolean; actor: string }[]).map(
    (r) => `${r.kind} ${r.subject}${r.ok ? '' : ' REFUSED'}`,
  );
};

describe('the audit search', () => {
  it('finds a toolset’s changes and its tools’ calls, a tool’s calls, refusals, and an actor’s rows', async () => {
    const s = await searched();
    expect(await rows(s, 'toolset=fs_write')).toEqual([
      'disable fs_write',
      'call delete_file REFUSED',
      'call write_file',
      'activate fs_read,fs_write',
    ]);
    expect(await rows(s, 'tool=read_text_file')).toEqual(['call read_text_file']);
    expect(await rows(s, 'tool=read_text_file&toolset=fs_write')).toEqual([]);
    expect(await rows(s, 'outcome=refused')).toEqual(['call delete_file REFUSED']);
    expect(await rows(s, 'kind=call&outcome=ok')).toEqual(['call read_text_file', 'call write_file']);
    expect(await rows(s, 'actor=admin&kind=disable')).toEqual(['disable fs_write']);
    expect(await rows(s, `until=${encodeURIComponent('2001-01-01T00:00:00Z')}`)).toEqual([]);
  });

  it('refuses a filter it cannot use, saying what is valid', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
    const s = stack;
    const bad = async (query: string) =>
      (await s.get(s.gatewayApp, `/mcp/admin/audit?${query}`, as(TOKENS.admin))).body.error;
    expect(await bad('kind=calls')).toMatch(/kind: .*"call"/);
    expect(await bad('until=yesterday')).toMatch(/until must be an ISO 8601 time/);
    expect(await bad('outcome=maybe')).toMatch(/outcome: .*"ok".*"refused"/);
    expect(await bad('toolset=FS')).toMatch(/toolset: must match/);
    // The agent's credential reads no audit.
    expect((await s.get(s.gatewayApp, '/mcp/admin/audit/export', as(TOKENS.agent))).status).toBe(403);
  });

  it('exports every matching row as JSON lines, a page at a time, and `toolshift audit --jsonl` writes them', async () => {
    const s = await searched();
    // More rows than a page of the export (1,000), by another actor.
    for (let i = 0; i < 2500; i++)
      s.gatewayStore.audit(
        { session_id: 'bulk', kind: 'read', subject: `r${i}`, ok: true },
        { actor: 'mcp' },
      );
    const res = await s.gatewayApp.request('/mcp/admin/audit/export?actor=mcp', {
      headers: as(TOKENS.admin),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const lines = (await res.text()).trimEnd().split('\n');
    expect(lines).toHaveLength(2500);
    const parsed = lines.map((l) => JSON.parse(l) as { id: number; subject: string; actor: string });
    expect(parsed[0].subject).toBe('r2499');
    expect(parsed.at(-1)?.subject).toBe('r0');
    expect(new Set(parsed.map((r) => r.id)).size).toBe(2500);
    expect(parsed.every((r) => r.actor === 'mcp')).toBe(true);

    let stdout = '';
    const code = await main(['audit', '--jsonl', '--toolset', 'fs_write', '--outcome', 'ok'], {
      stdout: (t) => {
        stdout += t;
      },
      stderr: () => undefined,
      env: { GATEWAY_URL: 'http://gateway', GATEWAY_ADMIN_TOKEN: TOKENS.admin, ...NO_STORED_CREDENTIALS },
      fetch: async (url, init) => s.gatewayApp.request(asLoopback(url), init),
    });
    expect(code).toBe(0);
    expect(
      stdout
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l).subject),
    ).toEqual(['fs_write', 'write_file', 'fs_read,fs_write']);
  });
});
