import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../client.ts';
import { openDatabase } from '../../lib/db/sqlite.ts';
import { LIMITS } from '../../lib/http/limits.ts';
import { APPROVAL_ARGUMENTS_MAX, approvalStore } from '../../mcp-gateway/ceiling/approvals.ts';
import { LISTED_DETAIL_MAX, LISTED_SUBJECT_MAX } from '../../mcp-gateway/store/audit.ts';
import { openGatewayState } from '../../mcp-gateway/store/store.ts';
import { NO_STORED_CREDENTIALS } from '../helpers/credentials.ts';
import { asLoopback, makeStack, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

// Issue 15 §4, first bullet: 80 MCP requests of 60,000 unknown toolset ids each grew gateway.db by 545 MB and
// then broke the operator's audit listing. Every list and string is now bounded, audit rows are capped, and
// the listing pages.

let stack: Stack | undefined;
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  await stack?.close();
  stack = undefined;
});

const TOKENS = { admin: 'adm-tok-1', agent: 'agt-tok-2', user: 'usr-tok-3', mcp: 'mcp-tok-4' };
const as = (token: string) => ({ authorization: `Bearer ${token}` });

async function connect(s: Stack, era: 'modern' | 'legacy') {
  const client = new Client(
    { name: 'flood', version: '1.0.0' },
    era === 'modern'
      ? { versionNegotiation: { mode: { pin: '2026-07-28' } } }
      : { supportedProtocolVersions: ['2025-11-25'] },
  );
  const transport = new StreamableHTTPClientTransport(new URL('http://127.0.0.1/mcp'), {
    fetch: async (url, init) => s.gatewayApp.request(String(url), init),
    requestInit: { headers: as(TOKENS.mcp) },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** gateway.db with its WAL and shared-memory files: what the attack grew. */
async function dbBytes(s: Stack): Promise<number> {
  await s.flushWrites();
  return ['', '-wal', '-shm']
    .map((suffix) => path.join(s.dataDir, `gateway.db${suffix}`))
    .reduce((sum, file) => {
      try {
        return sum + statSync(file).size;
      } catch {
        return sum;
      }
    }, 0);
}

const text = (r: { content?: unknown }) => (r.content as { text: string }[])[0]?.text ?? '';
const unknownIds = (n: number, salt: number) => Array.from({ length: n }, (_, i) => `nope_${salt}_${i}`);

describe('bounded inputs (issue 15 §4)', () => {
  it('refuses 60,000 unknown ids on every door; gateway.db barely grows and the audit listing still pages', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
    const s = stack;
    const modern = await connect(s, 'modern');
    const legacy = await connect(s, 'legacy');
    const before = await dbBytes(s);
    const expected = 'toolset_ids: at most 64 items (got 60000)';

    for (let i = 0; i < 20; i++) {
      const ids = unknownIds(60_000, i);
      // The MCP face, both eras: a tool error the model reads, and no handle minted for it.
      for (const client of [modern, legacy]) {
        const r = await client.callTool({
          name: 'manage_toolsets',
          arguments: { action: 'ACTIVATE', toolset_ids: ids },
        });
        expect(r.isError).toBe(true);
        expect(text(r)).toContain(expected);
        expect(text(r).length).toBeLessThan(1000);
      }
      // The operator's and the agent's REST doors.
      const admin = await s.post(
        s.gatewayApp,
        '/mcp/admin/toolsets',
        { action: 'DISABLE', toolset_ids: ids },
        as(TOKENS.admin),
      );
      expect(admin.status).toBe(400);
      expect(admin.body.error).toBe(`Invalid request body: ${expected}`);
      const meta = await s.post(
        s.gatewayApp,
        '/mcp/manage_toolsets',
        { session_id: 's1', arguments: { action: 'ACTIVATE', toolset_ids: ids } },
        as(TOKENS.agent),
      );
      expect(meta.status).toBe(400);
      expect(meta.body.error).toContain(expected);
    }
    const grown = (await dbBytes(s)) - before;
    // 80 refused requests of ~850 KB each. Before the bounds: ~545 MB. Now at most a few KiB of audit each,
    // plus WAL pages; 1 MiB is far below what one request of them used to add.
    expect(grown).toBeLessThan(1024 * 1024);

    // Nothing was minted or stored for the refused activations.
    const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) AS n FROM mcp_handles').get()).toEqual({ n: 0 });
      expect(db.prepare('SELECT COUNT(*) AS n FROM sessions').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }

    // The operator's default audit listing answers, and every row is small.
    const audit = await s.get(s.gatewayApp, '/mcp/admin/audit', as(TOKENS.admin));
    expect(audit.status).toBe(200);
    expect(audit.body.audit.length).toBeGreaterThan(0);
    for (const row of audit.body.audit) expect(JSON.stringify(row).length).toBeLessThan(4096);

    // All three services still answer.
    for (const app of [s.gatewayApp, s.agentApp, s.toolApp])
      expect((await app.request('http://127.0.0.1/health')).status).toBe(200);
  });

  it('pages a large audit table by cursor, and cuts rows stored before the bound', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
    const s = stack;
    await s.flushWrites();
    // 200,000 rows as a long-running gateway accumulates them, one with a 5 MB subject as an old database
    // may hold (the rows that made the listing answer 500 "Invalid string length").
    const db = new Database(path.join(s.dataDir, 'gateway.db'));
    db.transaction(() => {
      const add = db.prepare(
        'INSERT INTO audit (at, session_id, kind, subject, ok, detail, actor) VALUES (?, ?, ?, ?, 1, ?, ?)',
      );
      const at = new Date().toISOString();
      for (let i = 0; i < 200_000; i++)
        add.run(at, i % 2 ? 'odd' : 'even', 'call', `tool_${i}`, null, 'agent');
      add.run(at, 'huge', 'activate', 'x'.repeat(5_000_000), 'y'.repeat(3_000_000), 'mcp');
    })();
    db.close();

    const page = (q: string) => s.get(s.gatewayApp, `/mcp/admin/audit?${q}`, as(TOKENS.admin));
    const first = await page('limit=1000');
    expect(first.status).toBe(200);
    expect(first.body.audit).toHaveLength(1000);
    const huge = first.body.audit[0];
    expect(huge.subject).toBe(
      `${'x'.repeat(LISTED_SUBJECT_MAX)}… [${5_000_000 - LISTED_SUBJECT_MAX} more characters]`,
    );
    expect(huge.detail.startsWith('y'.repeat(LISTED_DETAIL_MAX))).toBe(true);
    expect(huge.detail.length).toBeLessThan(LISTED_DETAIL_MAX + 64);

    // The next page starts right after the first, without a gap or a repeat.
    const second = await page(`limit=1000&cursor=${first.body.next_cursor}`);
    expect(second.status).toBe(200);
    const ids = [...first.body.audit, ...second.body.audit].map((r: { id: number }) => r.id);
    expect(new Set(ids).size).toBe(2000);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(ids[1000]).toBe(ids[999] - 1);

    // Filtered by session, deep into the table: the index serves it.
    const odd = await page('session_id=odd&limit=3&cursor=100');
    expect(odd.body.audit.map((r: { subject: string }) => r.subject)).toEqual([
      'tool_97',
      'tool_95',
      'tool_93',
    ]);
    // The last page says so.
    const last = await page('limit=10&cursor=5');
    expect(last.body.audit).toHaveLength(4);
    expect(last.body.next_cursor).toBeNull();

    // `since` bounds the pages by time (the first id written since then, found in audit_at).
    const future = await page(`since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`);
    expect(future.body).toEqual({ audit: [], next_cursor: null });
    const recent = await page(
      `since=${encodeURIComponent(new Date(Date.now() - 60_000).toISOString())}&limit=3`,
    );
    expect(recent.body.audit.map((r: { id: number }) => r.id)).toEqual(ids.slice(0, 3));

    // Bad paging input is refused, saying what is valid.
    const tooMany = await page('limit=5000');
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toBe('Invalid query parameters: limit: at most 1000 (got 5000)');
    const bad = await page('cursor=abc');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('cursor: must be the next_cursor of an earlier page');
  });

  it('toolshift audit pages too, saying how to ask for the next page', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
    const s = stack;
    for (const id of ['fs_read', 'fs_write', 'fs_read'])
      await s.post(
        s.gatewayApp,
        '/mcp/admin/toolsets',
        { action: 'DEACTIVATE', toolset_ids: [id], session_id: `s_${id}` },
        as(TOKENS.admin),
      );
    const run = async (...argv: string[]) => {
      let stdout = '';
      const code = await main(argv, {
        stdout: (t) => {
          stdout += t;
        },
        stderr: () => undefined,
        env: { GATEWAY_URL: 'http://gateway', GATEWAY_ADMIN_TOKEN: TOKENS.admin, ...NO_STORED_CREDENTIALS },
        fetch: async (url, init) => s.gatewayApp.request(asLoopback(url), init),
      });
      return { code, stdout };
    };
    const first = await run('audit', '--limit', '2');
    expect(first.code).toBe(0);
    const lines = first.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toContain('in s_fs_write');
    expect(lines[1]).toContain('in s_fs_read');
    const cursor = /--cursor (\d+)/.exec(lines[2])?.[1];
    expect(lines[2]).toMatch(/^older rows: toolshift audit --cursor \d+ \(with the same filters\)$/);
    const next = await run('audit', '--limit', '2', '--cursor', cursor ?? '');
    expect(next.stdout.trim().split('\n')).toEqual([expect.stringContaining('in s_fs_read')]);
    const json = JSON.parse((await run('audit', '--json', '--limit', '1')).stdout);
    expect(json.next_cursor).toMatch(/^\d+$/);
  });

  it('names the field, the limit and the size seen on every service', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
    const s = stack;
    const cases: [Stack['gatewayApp'], string, unknown, Record<string, string>, string][] = [
      [
        s.agentApp,
        '/agent/execute_task',
        { goal: 'g'.repeat(LIMITS.goal + 1) },
        as(TOKENS.user),
        `goal: at most ${LIMITS.goal} characters (got ${LIMITS.goal + 1})`,
      ],
      [
        s.agentApp,
        '/agent/execute_task',
        { prompt: { name: 'p', arguments: Object.fromEntries(unknownIds(40, 0).map((k) => [k, 'v'])) } },
        as(TOKENS.user),
        `prompt.arguments: at most ${LIMITS.promptArgs} entries (got 40)`,
      ],
      [
        s.agentApp,
        '/agent/tasks/task_x/approvals/call_1',
        { approve: true, reason: 'r'.repeat(3000) },
        as(TOKENS.user),
        `reason: at most ${LIMITS.reason} characters (got 3000)`,
      ],
      [
        s.gatewayApp,
        '/mcp/admin/approvals/apr_1',
        { approve: false, reason: 'r'.repeat(3000) },
        as(TOKENS.admin),
        `reason: at most ${LIMITS.reason} characters (got 3000)`,
      ],
      [
        s.gatewayApp,
        '/mcp/admin/toolsets',
        { action: 'ACTIVATE', toolset_ids: ['i'.repeat(100)] },
        as(TOKENS.admin),
        'toolset_ids.0: at most 64 characters (got 100)',
      ],
      [
        s.gatewayApp,
        '/mcp/prompts/review/render',
        { arguments: { topic: 't'.repeat(LIMITS.promptArgValue + 1) } },
        as(TOKENS.admin),
        `arguments.topic: at most ${LIMITS.promptArgValue} characters (got ${LIMITS.promptArgValue + 1})`,
      ],
    ];
    for (const [app, url, body, headers, message] of cases) {
      const res = await s.post(app, url, body, headers);
      expect(res.status, url).toBe(400);
      expect(res.body.error, url).toContain(message);
    }
    const query = await s.get(s.gatewayApp, `/mcp/admin/toolsets?query=${'q'.repeat(300)}`, as(TOKENS.admin));
    expect(query.status).toBe(400);
    expect(query.body.error).toContain('query: at most 200 characters (got 300)');
    const listed = await s.post(
      s.gatewayApp,
      '/mcp/manage_toolsets',
      { session_id: 's1', arguments: { action: 'LIST', toolset_ids: [], query: 'q'.repeat(300) } },
      as(TOKENS.agent),
    );
    expect(listed.status).toBe(400);
    expect(listed.body.error).toContain('query: at most 200 characters (got 300)');
    // A modern handle of a megabyte is refused by its length, never looked up or echoed back.
    const modern = await connect(s, 'modern');
    const r = await modern.callTool({
      name: 'call_tool',
      arguments: { session: 'h'.repeat(1_000_000), name: 'read_text_file', arguments: {} },
    });
    expect(r.isError).toBe(true);
    expect(text(r)).toBe('`session` must be at most 128 characters (got 1000000)');
    const read = await modern.readResource({ uri: `toolshift://${'u'.repeat(1_000_000)}` }).catch((e) => e);
    expect(read).toBeInstanceOf(Error);
    expect(String(read.message)).toBe('Unknown resource; this server has toolshift://toolsets');
    // The error's data names the URI, cut, never a megabyte of it.
    expect(JSON.stringify(read.data ?? {}).length).toBeLessThan(1000);
    expect(JSON.stringify(read.data ?? {})).toContain('(1000012 characters)');
  });

  it('keeps a summary of a huge call in an approval row, still bound to the whole call', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'toolshift-approvals-'));
    const db = openDatabase(path.join(dir, 'gateway.db'));
    const state = await openGatewayState({ db });
    try {
      const approvals = approvalStore(state.approvals, { timeoutMs: 600_000 });
      const content = 'c'.repeat(4_000_000);
      const call = {
        session_id: 's1',
        kind: 'call' as const,
        subject: 'write_file',
        arguments: { path: 'big.txt', content },
        reason: 'policy',
      };
      const pending = await approvals.request(call);
      const stored = db.prepare('SELECT length(arguments) FROM approvals').pluck().get() as number;
      expect(stored).toBeLessThan(APPROVAL_ARGUMENTS_MAX + 512);
      expect(pending.arguments).toMatchObject({
        _summary: `arguments of ${JSON.stringify(call.arguments).length} characters, cut to the first ${APPROVAL_ARGUMENTS_MAX} to show`,
      });
      expect(String(pending.arguments?.preview)).toMatch(/^\{"path":"big.txt","content":"ccc/);
      await approvals.decide(pending.id, true, 'admin');
      // The yes is for exactly that call: one byte more is another call.
      expect(
        await approvals.approved({ ...call, arguments: { path: 'big.txt', content: `${content}c` } }),
      ).toBe(false);
      expect(await approvals.approved(call)).toBe(true);
    } finally {
      await state.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
