import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { approvalStore } from '../../../mcp-gateway/ceiling/approvals.ts';
import { handleStore } from '../../../mcp-gateway/face/handles.ts';
import { legacySessionStore } from '../../../mcp-gateway/face/legacy-store.ts';
import type { GatewayState } from '../../../mcp-gateway/store/interface.ts';
import { openGatewayState } from '../../../mcp-gateway/store/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// The databases the store before Kysely left behind (tests/fixtures/gateway-store, made by that code) open with
// the store of today: each is brought to the current schema on start, and every row is found where it was.

const fixtures = path.resolve('tests/fixtures/gateway-store');
interface Made {
  pending: string;
  approved: string;
  denied: string;
  handle: string;
  legacyKey: string;
  duplicate?: string;
}
const made = JSON.parse(readFileSync(path.join(fixtures, 'made.json'), 'utf8')) as {
  now: number;
} & Record<'unversioned' | 'pg_v4' | 'pg_v1', Made>;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A copy of a fixture file to open (the fixture itself stays as it is). */
function copyOf(name: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gateway-upgrade-'));
  dirs.push(dir);
  const file = path.join(dir, 'gateway.db');
  copyFileSync(path.join(fixtures, name), file);
  return file;
}

/** A fresh PostgreSQL database holding a fixture's dump. */
async function restored(name: string): Promise<string> {
  const url = await freshDatabase('upgrade');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(readFileSync(path.join(fixtures, name), 'utf8'));
  } finally {
    await client.end();
  }
  return url;
}

/** What every fixture made by the store of the time holds (make.ts `populate`), found through today's store. */
async function expectPopulated(state: GatewayState, ids: Made, opts: { callKeys: boolean }) {
  const { store } = state;
  const now = () => made.now;
  expect((await store.load('ses_alpha')).toolsets).toEqual(['fs_read', 'fs_write']);
  expect((await store.load('ses_beta')).toolsets).toEqual(['git_tools', 'memory']);
  const view = await store.load(null);
  expect([...view.disabled]).toEqual(['web']);
  expect(Object.fromEntries(view.overrides)).toEqual({ memory: true, fs_read: false });
  expect((await store.lastListing('memory')).map((d) => d.name)).toEqual(['read_graph', 'create_entities']);
  const pins = await store.pins('memory');
  expect([...(pins?.keys() ?? [])]).toEqual(['read_graph']);
  expect(pins?.get('read_graph')?.hash).toBe('hash-read-graph');
  expect(await store.pins('quiet')).toEqual(new Map());
  expect(await store.pins('never')).toBeNull();

  const audit = (await store.listAudit({ limit: 50 })).audit;
  expect(audit.map((r) => [r.actor, r.task_id, r.session_id, r.kind, r.subject, r.ok, r.detail])).toEqual([
    ['mcp client (mcp)', null, 'ses_beta', 'call', 'git_status', true, null],
    ['model in task task_1', 'task_1', 'ses_alpha', 'call', 'write_file', false, 'denied by the policy'],
    ['model in task task_1', 'task_1', 'ses_alpha', 'call', 'read_text_file', true, null],
    ['model in task task_1', 'task_1', 'ses_alpha', 'activate', 'fs_write,web', true, null],
    ['admin', null, null, 'disable', 'web', true, null],
  ]);
  expect((await store.listAudit({ limit: 50, subjects: ['web'] })).audit).toHaveLength(2);
  // Rows from before users are nobody's: no user's listing holds them.
  expect(audit.every((r) => r.for_user === null)).toBe(true);
  expect((await store.listAudit({ limit: 50, for_users: ['user:usr_a'] })).audit).toEqual([]);

  const approvals = approvalStore(state.approvals, { timeoutMs: 3_600_000, now });
  expect(await approvals.get(ids.pending)).toMatchObject({
    status: 'pending',
    task_id: 'task_1',
    subject: 'write_file',
    arguments: { path: 'a.txt', content: 'x' },
  });
  expect(await approvals.get(ids.approved)).toMatchObject({
    status: 'approved',
    decided_by: 'admin',
    for_user: null,
  });
  expect(await approvals.list({ limit: 50, for_users: ['user:usr_a'] })).toEqual([]);
  expect(await approvals.get(ids.denied)).toMatchObject({ status: 'denied', decision_reason: 'not today' });
  if (ids.duplicate) {
    // The second pending approval of one request (allowed then) expired in favour of the first.
    expect((await approvals.get(ids.duplicate))?.status).toBe('expired');
  }
  // One pending approval per request from now on.
  const again = await approvals.request({
    session_id: 'ses_alpha',
    task_id: 'task_1',
    kind: 'call',
    subject: 'write_file',
    arguments: { content: 'x', path: 'a.txt' },
    reason: 'the policy asks',
  });
  expect(again.id).toBe(ids.pending);

  const handles = handleStore(state.handles, { idleMs: 3_600_000, now });
  expect(await handles.use(ids.handle, 'cred-digest')).toBe(ids.handle);
  expect((await store.load(ids.handle)).toolsets).toEqual(['fs_read']);
  expect(await legacySessionStore(state.legacy).get(ids.legacyKey)).toEqual({
    credential: 'cred-digest',
    ownSession: 'ses_legacy_own',
    handle: ids.handle,
    init: {
      protocolVersion: '2025-06-18',
      capabilities: { roots: {} },
      clientInfo: { name: 'fixture-client', version: '1.0.0' },
    },
    lastSeen: made.now,
  });

  const start = { session_id: 'ses_alpha', tool: 'write_file', task_id: 'task_1', fence: 2, at: made.now };
  if (opts.callKeys) {
    expect(await state.callKeys.begin({ ...start, key: 'key-done' })).toEqual({
      existing: {
        key: 'key-done',
        session_id: 'ses_alpha',
        tool: 'write_file',
        state: 'done',
        outcome: JSON.stringify({ result: { success: true, result: 'written' } }),
        started_at: made.now,
      },
    });
    expect(await state.callKeys.begin({ ...start, key: 'key-started' })).toMatchObject({
      existing: { state: 'started', outcome: null },
    });
    expect(await state.callKeys.begin({ ...start, key: null, task_id: 'task_2', fence: 6 })).toEqual({
      fenced: 7,
    });
  } else {
    expect(await state.callKeys.begin({ ...start, key: 'key-done' })).toEqual({ run: true });
  }

  // It goes on as any database would: new sessions, toolsets after the old ones, rows after the old ones.
  expect(await store.activate('ses_alpha', ['memory'], [])).toMatchObject({
    changed: ['memory'],
    toolsets: ['fs_read', 'fs_write', 'memory'],
  });
  store.audit(
    { session_id: 'ses_alpha', kind: 'call', subject: 'after_upgrade', ok: true },
    { actor: 'test', for_user: 'user:usr_a' },
  );
  await store.flush();
  const [newest, previous] = (await store.listAudit({ limit: 2 })).audit;
  expect(newest).toMatchObject({ subject: 'after_upgrade', for_user: 'user:usr_a' });
  expect((await store.listAudit({ limit: 50, for_users: ['user:usr_a'] })).audit).toEqual([newest]);
  expect(newest.id).toBeGreaterThan(previous.id);
  // Discovery learns on an upgraded database too: its old rows are read (their task LISTed nothing: no credit).
  const later = Date.now() + 120_000;
  expect(await store.learnFromAudit(later, () => undefined)).toEqual({ rows: audit.length + 1, credits: 0 });
  expect(await store.learnedKeywords(later)).toEqual(new Map());
}

describe('a gateway.db the store before Kysely left', () => {
  it('with no versions (every table of the time): brought to the schema, every row found', async () => {
    const file = copyOf('gateway-unversioned.db');
    for (let start = 0; start < 2; start++) {
      // Opened twice: the second start finds it migrated and changes nothing.
      const state = await openGatewayState({ file });
      try {
        if (start === 0) await expectPopulated(state, made.unversioned, { callKeys: true });
        else
          expect((await state.store.load('ses_alpha')).toolsets).toEqual(['fs_read', 'fs_write', 'memory']);
      } finally {
        await state.close();
      }
    }
    const db = new Database(file, { readonly: true });
    try {
      const names = (type: string) =>
        db
          .prepare<[string], { name: string }>('SELECT name FROM sqlite_master WHERE type = ? ORDER BY name')
          .all(type)
          .map((r) => r.name);
      // The drift is gone: the indexes PostgreSQL had, SQLite has now too.
      expect(names('index')).toEqual(
        expect.arrayContaining([
          'approvals_one_pending',
          'session_toolsets_toolset',
          'mcp_handles_credential',
        ]),
      );
      expect(db.prepare('SELECT name FROM gateway_migrations').all()).toEqual([
        { name: '001_one_schema' },
        { name: '002_for_user' },
        { name: '003_learned_keywords' },
        { name: '004_tool_subsets' },
      ]);
    } finally {
      db.close();
    }
  });

  it('from before actors were recorded: the columns added, its rows kept (their actor unknown)', async () => {
    const state = await openGatewayState({ file: copyOf('gateway-before-actors.db') });
    try {
      const { store } = state;
      expect((await store.load('ses_old')).toolsets).toEqual(['fs_read', 'fs_write']);
      const view = await store.load(null);
      expect([...view.disabled]).toEqual(['web']);
      expect(Object.fromEntries(view.overrides)).toEqual({ memory: true });
      expect((await store.pins('memory'))?.get('read_graph')?.hash).toBe('hash-old');
      expect(
        (await store.listAudit({ limit: 10 })).audit.map((r) => [
          r.actor,
          r.task_id,
          r.subject,
          r.ok,
          r.detail,
        ]),
      ).toEqual([
        ['unknown', null, 'read_text_file', false, 'not found'],
        ['unknown', null, 'fs_read,fs_write', true, null],
      ]);
      // The tables it never had are there.
      expect(
        await state.callKeys.begin({ key: 'k', session_id: 's', tool: 't', task_id: 'x', fence: 1, at: 1 }),
      ).toEqual({ run: true });
      const handles = handleStore(state.handles, { idleMs: 60_000 });
      const h = await handles.mint(null);
      expect(await handles.use(h, null)).toBe(h);
    } finally {
      await state.close();
    }
  });
});

describe('PostgreSQL as the store before Kysely left it', () => {
  it.each([
    ['4', 'gateway-pg-v4.sql', made.pg_v4, true],
    ['1', 'gateway-pg-v1.sql', made.pg_v1, false],
  ] as const)(
    'at schema_migrations version %s: brought to the schema, every row found',
    async (_v, dump, ids, keys) => {
      const url = await restored(dump);
      const state = await openGatewayState({ databaseUrl: url });
      try {
        await expectPopulated(state, ids, { callKeys: keys });
      } finally {
        await state.close();
      }
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        // Booleans became the integers both databases keep.
        const { rows } = await client.query(
          `SELECT table_name, data_type FROM information_schema.columns
         WHERE (table_name, column_name) IN (('audit', 'ok'), ('toolset_settings', 'enabled'), ('toolset_defaults', 'active'))
         ORDER BY table_name`,
        );
        expect(rows).toEqual([
          { table_name: 'audit', data_type: 'integer' },
          { table_name: 'toolset_defaults', data_type: 'integer' },
          { table_name: 'toolset_settings', data_type: 'integer' },
        ]);
        expect((await client.query('SELECT name FROM gateway_migrations')).rows).toEqual([
          { name: '001_one_schema' },
          { name: '002_for_user' },
          { name: '003_learned_keywords' },
          { name: '004_tool_subsets' },
        ]);
      } finally {
        await client.end();
      }
      // A second start (another replica) finds it migrated.
      const again = await openGatewayState({ databaseUrl: url });
      try {
        expect((await again.store.load('ses_alpha')).toolsets).toEqual(['fs_read', 'fs_write', 'memory']);
      } finally {
        await again.close();
      }
    },
  );

  it('refuses a schema newer than it knows, changing nothing', async () => {
    const url = await restored('gateway-pg-v4.sql');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query("INSERT INTO schema_migrations (component, version) VALUES ('mcp-gateway', 5)");
    await client.end();
    await expect(openGatewayState({ databaseUrl: url })).rejects.toThrow(
      /mcp-gateway cannot use its PostgreSQL database \(DATABASE_URL\): .*version 5 of schema_migrations, newer/,
    );
  });
});
