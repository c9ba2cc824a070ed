import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { openDatabase } from '../../../lib/sqlite.ts';
import {
  type ApprovalStore,
  approvalStore,
  createApprovalStore,
} from '../../../mcp-gateway/ceiling/approvals.ts';
import { withActor } from '../../../mcp-gateway/core/audit-context.ts';
import { createHandleStore, type HandleStore, handleStore } from '../../../mcp-gateway/face/handles.ts';
import {
  createLegacySessionStore,
  type LegacySessionStore,
  legacySessionStore,
} from '../../../mcp-gateway/face/legacy-store.ts';
import { type CallKeyQueries, sqliteCallKeyQueries } from '../../../mcp-gateway/store/call-keys.ts';
import { type GatewayChange, openPostgresGatewayState } from '../../../mcp-gateway/store/postgres.ts';
import { createGatewayStore, type GatewayStore } from '../../../mcp-gateway/store/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// The gateway's store contract, run on both implementations: SQLite (the embedded default; two connections to
// one file, as two gateways on one data directory) and PostgreSQL (DATABASE_URL; two replicas on one
// database, on the real server the test run starts). What one replica changes the other answers.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface Replica {
  store: GatewayStore;
  approvals: ApprovalStore;
  handles: HandleStore;
  legacy: LegacySessionStore;
  callKeys: CallKeyQueries;
  /** Other replicas' changes heard (PostgreSQL only: SQLite replicas read the file's version instead). */
  heard: GatewayChange[];
  close(): Promise<void>;
}

interface Backend {
  name: string;
  /** Opens `n` replicas on one fresh place for data; those in `deaf` do not listen for the others' changes. */
  replicas(n: number, now?: () => number, opts?: { deaf?: number[] }): Promise<Replica[]>;
}

const sqlite: Backend = {
  name: 'SQLite',
  async replicas(n, now) {
    const dir = await mkdtemp(path.join(tmpdir(), 'gateway-store-'));
    dirs.push(dir);
    return Array.from({ length: n }, () => {
      const db = openDatabase(path.join(dir, 'gateway.db'));
      const store = createGatewayStore(db);
      return {
        store,
        approvals: createApprovalStore(db, { timeoutMs: 60_000, now }),
        handles: createHandleStore(db, { idleMs: 60_000, now, maxPerCredential: 2 }),
        legacy: createLegacySessionStore(db),
        callKeys: sqliteCallKeyQueries(db),
        heard: [],
        close: async () => store.close(),
      };
    });
  },
};

const postgres: Backend = {
  name: 'PostgreSQL',
  async replicas(n, now, opts) {
    const url = await freshDatabase('gateway');
    const out: Replica[] = [];
    for (let i = 0; i < n; i++) {
      const state = await openPostgresGatewayState(url);
      const heard: GatewayChange[] = [];
      const stop = opts?.deaf?.includes(i) ? async () => {} : state.listen((change) => heard.push(change));
      out.push({
        store: state.store,
        approvals: approvalStore(state.approvals, { timeoutMs: 60_000, now }),
        handles: handleStore(state.handles, { idleMs: 60_000, now, maxPerCredential: 2 }),
        legacy: legacySessionStore(state.legacy),
        callKeys: state.callKeys,
        heard,
        close: async () => {
          await stop();
          await state.close();
        },
      });
    }
    // Each is listening before the test changes anything.
    await new Promise((r) => setTimeout(r, 200));
    return out;
  },
};

describe.each([sqlite, postgres])('the gateway store on $name', (backend) => {
  it('keeps a session’s toolsets in activation order; a disabled toolset leaves every session', async () => {
    const [a] = await backend.replicas(1);
    try {
      expect(a.store.activeToolsets('s1')).toBeNull();
      expect(a.store.ensureSession('s1', ['fs'])).toBe(true);
      expect(a.store.ensureSession('s1', ['web'])).toBe(false);
      expect(a.store.activeToolsets('s1')).toEqual(['fs']);
      expect(a.store.activate('s1', ['web', 'fs', 'git'])).toEqual(['web', 'git']);
      expect(a.store.activeToolsets('s1')).toEqual(['fs', 'web', 'git']);
      expect(a.store.deactivate('s1', ['fs', 'nope'])).toEqual(['fs']);
      expect(a.store.activeToolsets('s1')).toEqual(['web', 'git']);
      a.store.setEnabled('web', false);
      expect([...a.store.disabledToolsets()]).toEqual(['web']);
      expect(a.store.activeToolsets('s1')).toEqual(['git']);
      a.store.setDefaults(['git'], false);
      expect([...a.store.defaultOverrides()]).toEqual([['git', false]]);
      a.store.dropToolset('git');
      expect(a.store.activeToolsets('s1')).toEqual([]);
      a.store.dropSessions(['s1']);
      expect(a.store.activeToolsets('s1')).toBeNull();
    } finally {
      await a.close();
    }
  });

  it('shares sessions, the ceiling and defaults between replicas: each answers the other’s change', async () => {
    const [a, b] = await backend.replicas(2);
    try {
      a.store.ensureSession('s1', ['fs']);
      expect(b.store.activeToolsets('s1')).toEqual(['fs']);
      expect([...b.store.disabledToolsets()]).toEqual([]);
      // A session's change is read by the other at its very next request.
      b.store.activate('s1', ['git']);
      expect(a.store.activeToolsets('s1')).toEqual(['fs', 'git']);
      // The ceiling is kept in memory: the other drops it once it hears of the change.
      a.store.setEnabled('fs', false);
      await vi.waitFor(() => expect([...b.store.disabledToolsets()]).toEqual(['fs']));
      expect(b.store.activeToolsets('s1')).toEqual(['git']);
      a.store.setDefaults(['web'], true);
      await vi.waitFor(() => expect(b.store.defaultOverrides().get('web')).toBe(true));
      b.store.setEnabled('fs', true);
      await vi.waitFor(() => expect([...a.store.disabledToolsets()]).toEqual([]));
      if (backend === postgres) {
        // What was heard: the other's changes only, never its own.
        await vi.waitFor(() =>
          expect(b.heard).toEqual(
            expect.arrayContaining([{ kind: 'session', id: 's1' }, { kind: 'settings' }]),
          ),
        );
        // a's ensureSession only: b's own activate is not heard back by b.
        expect(b.heard.filter((c) => c.kind === 'session')).toEqual([{ kind: 'session', id: 's1' }]);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a replica that hears nothing (its notifications lost) still sees a DISABLE within about a second', async () => {
    const [a, deaf] = await backend.replicas(2, undefined, { deaf: [1] });
    try {
      expect([...deaf.store.disabledToolsets()]).toEqual([]);
      a.store.setEnabled('fs', false);
      await vi.waitFor(() => expect([...deaf.store.disabledToolsets()]).toEqual(['fs']), { timeout: 3000 });
    } finally {
      await a.close();
      await deaf.close();
    }
  });

  it('keeps listings and pins; the audit trail pages newest first and is cut to its bounds', async () => {
    const [a, b] = await backend.replicas(2);
    try {
      const def = (name: string) => ({ name, description: `${name} it`, inputSchema: { type: 'object' } });
      expect(a.store.pins('up')).toBeNull();
      a.store.pin('up', []);
      expect(b.store.pins('up')).toEqual(new Map());
      a.store.pin('up', [{ hash: 'h1', definition: def('one') }]);
      expect(b.store.pins('up')?.get('one')).toEqual({ hash: 'h1', definition: def('one') });
      b.store.saveListing('up', [def('two'), def('one')]);
      expect(a.store.lastListing('up').map((d) => d.name)).toEqual(['two', 'one']);
      if (backend === postgres)
        await vi.waitFor(() => expect(b.heard).toContainEqual({ kind: 'pins', id: 'up' }));

      for (let i = 0; i < 5; i++)
        a.store.audit({ session_id: 's1', kind: 'call', subject: `t${i}`, ok: i !== 2 });
      b.store.audit({
        session_id: 's2',
        kind: 'call',
        subject: 'x'.repeat(5000),
        ok: true,
        detail: 'y'.repeat(9000),
      });
      a.store.flush();
      b.store.flush();
      const first = a.store.listAudit({ session_id: 's1', limit: 3 });
      expect(first.audit.map((r) => [r.subject, r.ok])).toEqual([
        ['t4', true],
        ['t3', true],
        ['t2', false],
      ]);
      const second = a.store.listAudit({ session_id: 's1', limit: 3, cursor: first.next_cursor ?? '' });
      expect(second.audit.map((r) => r.subject)).toEqual(['t1', 't0']);
      expect(second.next_cursor).toBeNull();
      const [long] = b.store.listAudit({ session_id: 's2', limit: 5 }).audit;
      expect(long.subject).toMatch(/^x{512}… \[4488 more characters\]$/);
      expect(long.detail).toMatch(/^y{2048}… \[6952 more characters\]$/);
      expect(a.store.listAudit({ limit: 10, since: '2999-01-01T00:00:00Z' }).audit).toEqual([]);
      expect(a.store.pruneAuditOverflow(2, 100)).toBe(4);
      expect(a.store.listAudit({ limit: 10 }).audit.map((r) => r.subject.slice(0, 2))).toEqual(['xx', 't4']);
      expect(b.store.pruneAudit('2999-01-01T00:00:00Z', 100)).toBe(2);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('searches the audit trail by actor, kind, subject (a list of toolsets too), outcome and time', async () => {
    const [a] = await backend.replicas(1);
    try {
      const write = (actor: string, entry: Parameters<GatewayStore['audit']>[0]) =>
        withActor({ actor, task_id: actor === 'model in task t1' ? 't1' : undefined }, () =>
          a.store.audit(entry),
        );
      write('admin', { session_id: null, kind: 'disable', subject: 'fs_write', ok: true });
      write('model in task t1', {
        session_id: 's1',
        kind: 'activate',
        subject: 'fs_read,fs_write',
        ok: true,
      });
      write('model in task t1', {
        session_id: 's1',
        kind: 'call',
        subject: 'write_file',
        ok: false,
        detail: 'no',
      });
      write('model in task t1', { session_id: 's1', kind: 'call', subject: 'read_text_file', ok: true });
      write('mcp', { session_id: 's2', kind: 'call', subject: 'fs_write_extra', ok: true });
      a.store.flush();
      const subjects = (filter: Partial<Parameters<GatewayStore['listAudit']>[0]>) =>
        a.store.listAudit({ limit: 50, ...filter }).audit.map((r) => r.subject);
      expect(subjects({ actor: 'admin' })).toEqual(['fs_write']);
      expect(subjects({ kind: 'call' })).toEqual(['fs_write_extra', 'read_text_file', 'write_file']);
      expect(subjects({ ok: false })).toEqual(['write_file']);
      expect(subjects({ kind: 'call', ok: true, session_id: 's1' })).toEqual(['read_text_file']);
      // A toolset's rows: alone or in a list, never a subject that merely starts with its id.
      expect(subjects({ subjects: ['fs_write', 'write_file'] })).toEqual([
        'write_file',
        'fs_read,fs_write',
        'fs_write',
      ]);
      expect(subjects({ subjects: [] })).toEqual([]);
      expect(subjects({ task_id: 't1', subjects: ['fs_read'] })).toEqual(['fs_read,fs_write']);
      expect(subjects({ until: '2000-01-01T00:00:00Z' })).toEqual([]);
      expect(subjects({ until: '2999-01-01T00:00:00Z', actor: 'mcp' })).toEqual(['fs_write_extra']);
      // Paging goes on within the search.
      const first = a.store.listAudit({ kind: 'call', limit: 2 });
      expect(
        a.store
          .listAudit({ kind: 'call', limit: 2, cursor: first.next_cursor ?? '' })
          .audit.map((r) => r.subject),
      ).toEqual(['write_file']);
    } finally {
      await a.close();
    }
  });

  it('shares keyed calls and tasks’ fences: a key begun on one replica is found by the other, once', async () => {
    const [a, b] = await backend.replicas(2);
    try {
      const start = (key: string | null, fence: number) => ({
        key,
        session_id: 's1',
        tool: 'edit_file',
        task_id: 't1',
        fence,
        at: Date.now(),
      });
      expect(a.callKeys.begin(start('k1', 1))).toEqual({ run: true });
      const running = b.callKeys.begin(start('k1', 1));
      expect(running).toMatchObject({ existing: { key: 'k1', state: 'started', outcome: null } });
      a.callKeys.finish('k1', '{"result":1}', Date.now());
      expect(b.callKeys.begin(start('k1', 1))).toMatchObject({
        existing: { state: 'done', outcome: '{"result":1}' },
      });
      // A higher fence seen on one replica refuses a lower one on the other, and records nothing.
      expect(b.callKeys.begin(start('k2', 3))).toEqual({ run: true });
      expect(a.callKeys.begin(start('k3', 2))).toEqual({ fenced: 3 });
      expect(a.callKeys.announce('t1', 5, Date.now())).toBe(5);
      expect(b.callKeys.announce('t1', 4, Date.now())).toBe(5);
      expect(b.callKeys.begin(start('k3', 4))).toEqual({ fenced: 5 });
      expect(b.callKeys.begin(start('k3', 5))).toEqual({ run: true });
      // A call refused before it ran is forgotten; a finished one is not.
      b.callKeys.forget('k3');
      b.callKeys.forget('k1');
      expect(a.callKeys.begin(start('k3', 5))).toEqual({ run: true });
      expect(a.callKeys.begin(start('k1', 5))).toMatchObject({ existing: { state: 'done' } });
      // Retention: keys started and fences seen before the cut-off go, a batch at a time.
      expect(a.callKeys.prune(Date.now() + 1000, 2)).toBe(2);
      expect(b.callKeys.prune(Date.now() + 1000, 100)).toBe(2);
      expect(b.callKeys.begin(start('k1', 0))).toEqual({ run: true });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('shares approvals: requested on one replica, decided once on the other, spent once', async () => {
    let now = 1_000_000;
    const [a, b] = await backend.replicas(2, () => now);
    try {
      const subject = {
        session_id: 's1',
        kind: 'call' as const,
        subject: 'write_file',
        arguments: { path: 'a', content: 'b' },
        reason: 'policy asks',
      };
      const pending = a.approvals.request(subject);
      expect(b.approvals.request({ ...subject, arguments: { content: 'b', path: 'a' } }).id).toBe(pending.id);
      expect(b.approvals.list({ status: 'pending', limit: 10 }).map((p) => p.id)).toEqual([pending.id]);
      expect(b.approvals.decide(pending.id, true, 'operator', 'fine')?.changed).toBe(true);
      expect(a.approvals.decide(pending.id, false, 'someone')).toMatchObject({
        changed: false,
        approval: { status: 'approved', decided_by: 'operator' },
      });
      expect(a.approvals.approved(subject)).toBe(true);
      expect(a.approvals.spend([subject])?.map((p) => [p.id, p.status])).toEqual([[pending.id, 'used']]);
      expect(b.approvals.spend([subject])).toBeNull();
      expect(b.approvals.approved(subject)).toBe(false);
      const late = b.approvals.request({ ...subject, subject: 'edit_file' });
      now += 61_000;
      expect(a.approvals.get(late.id)?.status).toBe('expired');
      expect(b.approvals.prune(now, 10)).toBe(2);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('shares MCP handles (bound to their credential, bounded per credential) and legacy sessions', async () => {
    let now = 1_000_000;
    const [a, b] = await backend.replicas(2, () => now);
    try {
      const h1 = a.handles.mint('cred');
      expect(b.handles.use(h1, 'cred')).toBe(h1);
      expect(() => b.handles.use(h1, 'other')).toThrow(/Unknown session handle/);
      now += 1;
      const h2 = b.handles.mint('cred');
      now += 1;
      a.handles.mint('cred'); // the third of a credential allowed two: the least recently used goes
      expect(() => b.handles.use(h1, 'cred')).toThrow(/Unknown session handle/);
      expect(a.handles.use(h2, 'cred')).toBe(h2);
      now += 61_000;
      expect(a.handles.sweep()).toBe(2);

      const init = {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'c', version: '1' },
      };
      a.legacy.save('k1', { credential: 'cred', ownSession: 'own1', handle: null, init }, 100);
      b.legacy.setHandle('k1', h2);
      b.legacy.touch([['k1', 500]]);
      a.legacy.touch([['k1', 300]]); // never back
      expect(a.legacy.get('k1')).toEqual({
        credential: 'cred',
        ownSession: 'own1',
        handle: h2,
        init,
        lastSeen: 500,
      });
      expect(b.legacy.idle(600)).toEqual([{ key: 'k1', ownSession: 'own1' }]);
      a.legacy.drop('k1');
      expect(b.legacy.get('k1')).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });
});
