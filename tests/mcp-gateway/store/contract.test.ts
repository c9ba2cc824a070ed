import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { type ApprovalStore, approvalStore } from '../../../mcp-gateway/ceiling/approvals.ts';
import { type HandleStore, handleStore } from '../../../mcp-gateway/face/handles.ts';
import { type LegacySessionStore, legacySessionStore } from '../../../mcp-gateway/face/legacy-store.ts';
import type { AuditActor, AuditEntry } from '../../../mcp-gateway/store/audit.ts';
import type { CallKeyQueries, GatewayChange, GatewayStore } from '../../../mcp-gateway/store/interface.ts';
import { openGatewayState } from '../../../mcp-gateway/store/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// The gateway's store contract, run on its one implementation over both databases: SQLite (the embedded
// default; two connections to one file, as two gateways on one data directory) and PostgreSQL (DATABASE_URL;
// two replicas on one database, on the real server the test run starts). What one replica changes the other
// answers.

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
  /** Resolved once the replica listens (PostgreSQL, unless deaf). */
  listening: Promise<void>;
  close(): Promise<void>;
}

interface Backend {
  name: string;
  /** Opens `n` replicas on one fresh place for data; those in `deaf` do not listen for the others' changes. */
  replicas(n: number, now?: () => number, opts?: { deaf?: number[] }): Promise<Replica[]>;
}

const system: AuditActor = { actor: 'system' };

async function replicasAt(
  at: { file: string } | { databaseUrl: string },
  n: number,
  now?: () => number,
  deaf: number[] = [],
): Promise<Replica[]> {
  const out: Replica[] = [];
  for (let i = 0; i < n; i++) {
    const state = await openGatewayState(at);
    const heard: GatewayChange[] = [];
    let stop = async () => {};
    // Resolved once it hears the others (never on SQLite, which has nothing to hear; never when deaf).
    const listening = new Promise<void>((onListen) => {
      if (!deaf.includes(i)) stop = state.listen((change) => heard.push(change), { onListen });
    });
    out.push({
      store: state.store,
      approvals: approvalStore(state.approvals, { timeoutMs: 60_000, now }),
      handles: handleStore(state.handles, { idleMs: 60_000, now, maxPerCredential: 2 }),
      legacy: legacySessionStore(state.legacy),
      callKeys: state.callKeys,
      heard,
      listening,
      close: async () => {
        await stop();
        await state.close();
      },
    });
  }
  return out;
}

const sqlite: Backend = {
  name: 'SQLite',
  async replicas(n, now) {
    const dir = await mkdtemp(path.join(tmpdir(), 'gateway-store-'));
    dirs.push(dir);
    return replicasAt({ file: path.join(dir, 'gateway.db') }, n, now);
  },
};

const postgres: Backend = {
  name: 'PostgreSQL',
  async replicas(n, now, opts) {
    const deaf = opts?.deaf ?? [];
    const out = await replicasAt({ databaseUrl: await freshDatabase('gateway') }, n, now, deaf);
    // Each is listening before the test changes anything.
    await Promise.all(out.filter((_, i) => !deaf.includes(i)).map((r) => r.listening));
    return out;
  },
};

describe.each([sqlite, postgres])('the gateway store on $name', (backend) => {
  const toolsets = async (store: GatewayStore, id: string) => (await store.load(id)).toolsets;
  const disabled = async (store: GatewayStore) => [...(await store.load(null)).disabled];

  it('keeps a session’s toolsets in activation order; a disabled toolset leaves every session', async () => {
    const [a] = await backend.replicas(1);
    try {
      expect(await toolsets(a.store, 's1')).toBeNull();
      // A session never stored is stored with what it had (its defaults) at its first change.
      expect(await a.store.activate('s1', ['web', 'fs', 'git'], ['fs'])).toMatchObject({
        changed: ['web', 'git'],
        toolsets: ['fs', 'web', 'git'],
      });
      expect(await a.store.activate('s1', ['web'], ['other'])).toMatchObject({
        changed: [],
        toolsets: ['fs', 'web', 'git'],
      });
      expect(await a.store.deactivate('s1', ['fs', 'nope'], [])).toMatchObject({
        changed: ['fs'],
        toolsets: ['web', 'git'],
      });
      expect(await toolsets(a.store, 's1')).toEqual(['web', 'git']);
      await a.store.setEnabled(['web'], false);
      expect(await disabled(a.store)).toEqual(['web']);
      expect(await toolsets(a.store, 's1')).toEqual(['git']);
      // A disabled toolset is not activated, whatever the caller read before.
      expect((await a.store.activate('s1', ['web', 'fs'], [])).changed).toEqual(['fs']);
      await a.store.setDefaults(['git'], false);
      expect([...(await a.store.load(null)).overrides]).toEqual([['git', false]]);
      await a.store.dropToolset('git');
      expect(await toolsets(a.store, 's1')).toEqual(['fs']);
      await a.store.dropSessions(['s1']);
      expect(await toolsets(a.store, 's1')).toBeNull();
      // A deactivation in a session never stored stores it with what it had.
      expect(await a.store.deactivate('s2', ['git'], ['fs', 'git'])).toMatchObject({
        changed: ['git'],
        toolsets: ['fs'],
      });
    } finally {
      await a.close();
    }
  });

  it('keeps a toolset active with some of its tools, widened by later activations', async () => {
    const [a] = await backend.replicas(1);
    try {
      const some = new Map([['gh', ['issue_read']]]);
      expect(await a.store.activate('s1', ['gh', 'fs'], [], some)).toMatchObject({
        changed: ['gh', 'fs'],
        toolsets: ['gh', 'fs'],
        only: new Map([['gh', ['issue_read']]]),
      });
      // More of its tools: added to those it has; the same ones again change nothing.
      const more = await a.store.activate('s1', ['gh'], [], new Map([['gh', ['issue_write', 'issue_read']]]));
      expect(more.changed).toEqual(['gh']);
      expect(more.only.get('gh')).toEqual(['issue_read', 'issue_write']);
      expect((await a.store.activate('s1', ['gh'], [], new Map([['gh', ['issue_write']]]))).changed).toEqual(
        [],
      );
      expect([...(await a.store.load('s1')).only]).toEqual([['gh', ['issue_read', 'issue_write']]]);
      // A toolset already active in full stays in full; an activation without tools makes a partial one full.
      expect((await a.store.activate('s1', ['fs'], [], new Map([['fs', ['read']]]))).changed).toEqual([]);
      const full = await a.store.activate('s1', ['gh'], []);
      expect(full).toMatchObject({ changed: ['gh'], toolsets: ['gh', 'fs'], only: new Map() });
    } finally {
      await a.close();
    }
  });

  it('shares sessions, the ceiling and defaults between replicas: each answers the other’s change', async () => {
    const [a, b] = await backend.replicas(2);
    try {
      await a.store.activate('s1', [], ['fs']);
      expect(await toolsets(b.store, 's1')).toEqual(['fs']);
      expect(await disabled(b.store)).toEqual([]);
      // A session's change is read by the other at its very next request.
      await b.store.activate('s1', ['git'], []);
      expect(await toolsets(a.store, 's1')).toEqual(['fs', 'git']);
      // The ceiling is kept in memory: the other drops it once it hears of the change.
      await a.store.setEnabled(['fs'], false);
      await vi.waitFor(async () => expect(await disabled(b.store)).toEqual(['fs']));
      expect(await toolsets(b.store, 's1')).toEqual(['git']);
      await a.store.setDefaults(['web'], true);
      await vi.waitFor(async () => expect((await b.store.load(null)).overrides.get('web')).toBe(true));
      await b.store.setEnabled(['fs'], true);
      await vi.waitFor(async () => expect(await disabled(a.store)).toEqual([]));
      if (backend === postgres) {
        // What was heard: the other's changes only, never its own.
        await vi.waitFor(() =>
          expect(b.heard).toEqual(
            expect.arrayContaining([{ kind: 'session', id: 's1' }, { kind: 'settings' }]),
          ),
        );
        // a's first change only: b's own activate is not heard back by b.
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
      expect(await disabled(deaf.store)).toEqual([]);
      await a.store.setEnabled(['fs'], false);
      await vi.waitFor(async () => expect(await disabled(deaf.store)).toEqual(['fs']), { timeout: 3000 });
    } finally {
      await a.close();
      await deaf.close();
    }
  });

  // Concurrent transactions of two connections to one SQLite file in one process cannot be tested: one
  // connection's busy wait would hold the thread the other's commit needs. (Gateways on one file are processes
  // of their own; within one, every statement goes through its one connection, one transaction at a time.)
  it.runIf(backend === postgres)(
    'numbers two replicas’ activations in one session in turn, neither lost',
    async () => {
      const [a, b] = await backend.replicas(2);
      try {
        await a.store.activate('s1', [], []);
        const ids = Array.from({ length: 10 }, (_, i) => `t${i}`);
        await Promise.all(ids.map((id, i) => (i % 2 ? a : b).store.activate('s1', [id], [])));
        const after = (await toolsets(a.store, 's1')) ?? [];
        expect([...after].sort()).toEqual(ids);
        const seqs = new Set(after);
        expect(seqs.size).toBe(10);
      } finally {
        await a.close();
        await b.close();
      }
    },
  );

  it('keeps listings and pins; the audit trail pages newest first and is cut to its bounds', async () => {
    const [a, b] = await backend.replicas(2);
    try {
      const def = (name: string) => ({ name, description: `${name} it`, inputSchema: { type: 'object' } });
      expect(await a.store.pins('up')).toBeNull();
      await a.store.pin('up', []);
      expect(await b.store.pins('up')).toEqual(new Map());
      await a.store.pin('up', [{ hash: 'h1', definition: def('one') }]);
      expect((await b.store.pins('up'))?.get('one')).toEqual({ hash: 'h1', definition: def('one') });
      await b.store.saveListing('up', [def('two'), def('one')]);
      expect((await a.store.lastListing('up')).map((d) => d.name)).toEqual(['two', 'one']);
      if (backend === postgres)
        await vi.waitFor(() => expect(b.heard).toContainEqual({ kind: 'pins', id: 'up' }));

      for (let i = 0; i < 5; i++)
        a.store.audit({ session_id: 's1', kind: 'call', subject: `t${i}`, ok: i !== 2 }, system);
      await a.store.flush();
      b.store.audit(
        {
          session_id: 's2',
          kind: 'call',
          subject: 'x'.repeat(5000),
          ok: true,
          detail: 'y'.repeat(9000),
        },
        system,
      );
      await b.store.flush();
      const first = await a.store.listAudit({ session_id: 's1', limit: 3 });
      expect(first.audit.map((r) => [r.subject, r.ok])).toEqual([
        ['t4', true],
        ['t3', true],
        ['t2', false],
      ]);
      const second = await a.store.listAudit({ session_id: 's1', limit: 3, cursor: first.next_cursor ?? '' });
      expect(second.audit.map((r) => r.subject)).toEqual(['t1', 't0']);
      expect(second.next_cursor).toBeNull();
      const [long] = (await b.store.listAudit({ session_id: 's2', limit: 5 })).audit;
      expect(long.subject).toMatch(/^x{512}… \[4488 more characters\]$/);
      expect(long.detail).toMatch(/^y{2048}… \[6952 more characters\]$/);
      expect((await a.store.listAudit({ limit: 10, since: '2999-01-01T00:00:00Z' })).audit).toEqual([]);
      expect(await a.store.pruneAuditOverflow(2, 100)).toBe(4);
      expect((await a.store.listAudit({ limit: 10 })).audit.map((r) => r.subject.slice(0, 2))).toEqual([
        'xx',
        't4',
      ]);
      expect(await b.store.pruneAudit('2999-01-01T00:00:00Z', 100)).toBe(2);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('writes a burst of audit rows in few statements, every one of them, in order', async () => {
    const [a] = await backend.replicas(1);
    try {
      for (let i = 0; i < 1234; i++)
        a.store.audit({ session_id: 'burst', kind: 'call', subject: `t${i}`, ok: true }, system);
      await a.store.flush();
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await a.store.listAudit({ session_id: 'burst', limit: 500, cursor });
        seen.push(...page.audit.map((r) => r.subject));
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      expect(seen).toHaveLength(1234);
      expect(seen[0]).toBe('t1233');
      expect(seen.at(-1)).toBe('t0');
    } finally {
      await a.close();
    }
  });

  it('searches the audit trail by actor, kind, subject (a list of toolsets too), outcome and time', async () => {
    const [a] = await backend.replicas(1);
    try {
      const write = (actor: string, entry: AuditEntry) =>
        a.store.audit(entry, { actor, task_id: actor === 'model in task t1' ? 't1' : undefined });
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
      await a.store.flush();
      const subjects = async (filter: Partial<Parameters<GatewayStore['listAudit']>[0]>) =>
        (await a.store.listAudit({ limit: 50, ...filter })).audit.map((r) => r.subject);
      expect(await subjects({ actor: 'admin' })).toEqual(['fs_write']);
      expect(await subjects({ kind: 'call' })).toEqual(['fs_write_extra', 'read_text_file', 'write_file']);
      expect(await subjects({ ok: false })).toEqual(['write_file']);
      expect(await subjects({ kind: 'call', ok: true, session_id: 's1' })).toEqual(['read_text_file']);
      // A toolset's rows: alone or in a list, never a subject that merely starts with its id.
      expect(await subjects({ subjects: ['fs_write', 'write_file'] })).toEqual([
        'write_file',
        'fs_read,fs_write',
        'fs_write',
      ]);
      expect(await subjects({ subjects: [] })).toEqual([]);
      expect(await subjects({ task_id: 't1', subjects: ['fs_read'] })).toEqual(['fs_read,fs_write']);
      expect(await subjects({ until: '2000-01-01T00:00:00Z' })).toEqual([]);
      expect(await subjects({ until: '2999-01-01T00:00:00Z', actor: 'mcp' })).toEqual(['fs_write_extra']);
      // Paging goes on within the search.
      const first = await a.store.listAudit({ kind: 'call', limit: 2 });
      expect(
        (await a.store.listAudit({ kind: 'call', limit: 2, cursor: first.next_cursor ?? '' })).audit.map(
          (r) => r.subject,
        ),
      ).toEqual(['write_file']);
    } finally {
      await a.close();
    }
  });

  it('keeps whose work a row is: the audit and approvals listed for some users only, page by page', async () => {
    const [a] = await backend.replicas(1);
    try {
      for (let i = 0; i < 5; i++) {
        const user = ['user:alice', 'user:bob', undefined][i % 3];
        a.store.audit(
          { session_id: 's1', kind: 'call', subject: `t${i}`, ok: true },
          { actor: `model in task t${i}`, for_user: user },
        );
      }
      const page = (f: Partial<Parameters<GatewayStore['listAudit']>[0]>) =>
        a.store.listAudit({ limit: 50, ...f });
      expect((await page({})).audit.map((r) => [r.subject, r.for_user])).toEqual([
        ['t4', 'user:bob'],
        ['t3', 'user:alice'],
        ['t2', null],
        ['t1', 'user:bob'],
        ['t0', 'user:alice'],
      ]);
      // A page of alice's rows is full of hers; the cursor goes on among hers.
      const first = await page({ for_users: ['user:alice'], limit: 1 });
      expect(first.audit.map((r) => r.subject)).toEqual(['t3']);
      const second = await page({ for_users: ['user:alice'], limit: 1, cursor: first.next_cursor ?? '' });
      expect(second.audit.map((r) => r.subject)).toEqual(['t0']);
      expect((await page({ for_users: ['user:alice', 'user:bob'] })).audit).toHaveLength(4);
      expect((await page({ for_users: [] })).audit).toEqual([]);

      const ask = (subject: string, for_user?: string) =>
        a.approvals.request({ session_id: 's1', kind: 'call', subject, reason: 'policy asks', for_user });
      const mine = await ask('write_file', 'user:alice');
      const theirs = await ask('delete_file', 'user:bob');
      const nobody = await ask('edit_file');
      expect([mine.for_user, theirs.for_user, nobody.for_user]).toEqual(['user:alice', 'user:bob', null]);
      const listed = async (for_users?: string[]) =>
        (await a.approvals.list({ limit: 10, for_users })).map((p) => p.id).sort();
      expect(await listed(['user:alice'])).toEqual([mine.id]);
      expect(await listed(['user:alice', 'user:bob'])).toEqual([mine.id, theirs.id].sort());
      expect(await listed([])).toEqual([]);
      expect(await listed()).toEqual([mine.id, theirs.id, nobody.id].sort());
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
      expect(await a.callKeys.begin(start('k1', 1))).toEqual({ run: true });
      const running = await b.callKeys.begin(start('k1', 1));
      expect(running).toMatchObject({ existing: { key: 'k1', state: 'started', outcome: null } });
      await a.callKeys.finish('k1', '{"result":1}', Date.now());
      expect(await b.callKeys.begin(start('k1', 1))).toMatchObject({
        existing: { state: 'done', outcome: '{"result":1}' },
      });
      // A higher fence seen on one replica refuses a lower one on the other, and records nothing.
      expect(await b.callKeys.begin(start('k2', 3))).toEqual({ run: true });
      expect(await a.callKeys.begin(start('k3', 2))).toEqual({ fenced: 3 });
      expect(await a.callKeys.announce('t1', 5, Date.now())).toBe(5);
      expect(await b.callKeys.announce('t1', 4, Date.now())).toBe(5);
      expect(await b.callKeys.begin(start('k3', 4))).toEqual({ fenced: 5 });
      expect(await b.callKeys.begin(start('k3', 5))).toEqual({ run: true });
      // A call refused before it ran is forgotten; a finished one is not.
      await b.callKeys.forget('k3');
      await b.callKeys.forget('k1');
      expect(await a.callKeys.begin(start('k3', 5))).toEqual({ run: true });
      expect(await a.callKeys.begin(start('k1', 5))).toMatchObject({ existing: { state: 'done' } });
      // Two replicas given one key at once: one runs it, the other finds it (SQLite: one after the other).
      const both =
        backend === postgres
          ? await Promise.all([a.callKeys.begin(start('k4', 5)), b.callKeys.begin(start('k4', 5))])
          : [await a.callKeys.begin(start('k4', 5)), await b.callKeys.begin(start('k4', 5))];
      expect(both.filter((x) => 'run' in x)).toHaveLength(1);
      // Retention: keys started and fences seen before the cut-off go, a batch at a time.
      expect(await a.callKeys.prune(Date.now() + 1000, 2)).toBe(2);
      expect(await b.callKeys.prune(Date.now() + 1000, 100)).toBe(3);
      expect(await b.callKeys.begin(start('k1', 0))).toEqual({ run: true });
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
      const pending = await a.approvals.request(subject);
      expect((await b.approvals.request({ ...subject, arguments: { content: 'b', path: 'a' } })).id).toBe(
        pending.id,
      );
      expect((await b.approvals.list({ status: 'pending', limit: 10 })).map((p) => p.id)).toEqual([
        pending.id,
      ]);
      expect((await b.approvals.decide(pending.id, true, 'operator', 'fine'))?.changed).toBe(true);
      expect(await a.approvals.decide(pending.id, false, 'someone')).toMatchObject({
        changed: false,
        approval: { status: 'approved', decided_by: 'operator' },
      });
      expect(await a.approvals.approved(subject)).toBe(true);
      expect((await a.approvals.spend([subject]))?.map((p) => [p.id, p.status])).toEqual([
        [pending.id, 'used'],
      ]);
      expect(await b.approvals.spend([subject])).toBeNull();
      expect(await b.approvals.approved(subject)).toBe(false);
      // Asked on both at once: one pending approval (SQLite: one after the other).
      const ask = (r: Replica) => r.approvals.request({ ...subject, subject: 'delete_file' });
      const [x, y] =
        backend === postgres ? await Promise.all([ask(a), ask(b)]) : [await ask(a), await ask(b)];
      expect(x.id).toBe(y.id);
      const late = await b.approvals.request({ ...subject, subject: 'edit_file' });
      now += 61_000;
      expect((await a.approvals.get(late.id))?.status).toBe('expired');
      expect(await b.approvals.prune(now, 10)).toBe(3);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('shares MCP handles (bound to their credential, bounded per credential) and legacy sessions', async () => {
    let now = 1_000_000;
    const [a, b] = await backend.replicas(2, () => now);
    try {
      const h1 = await a.handles.mint('cred');
      expect(await b.handles.use(h1, 'cred')).toBe(h1);
      await expect(b.handles.use(h1, 'other')).rejects.toThrow(/Unknown session handle/);
      now += 1;
      const h2 = await b.handles.mint('cred');
      now += 1;
      await a.handles.mint('cred'); // the third of a credential allowed two: the least recently used goes
      await expect(b.handles.use(h1, 'cred')).rejects.toThrow(/Unknown session handle/);
      expect(await a.handles.use(h2, 'cred')).toBe(h2);
      // A gateway without tokens binds handles to no credential.
      const open = await a.handles.mint(null);
      expect(await b.handles.use(open, null)).toBe(open);
      now += 61_000;
      expect(await a.handles.sweep()).toBe(3);

      const init = {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'c', version: '1' },
      };
      await a.legacy.save('k1', { credential: 'cred', ownSession: 'own1', handle: null, init }, 100);
      await b.legacy.setHandle('k1', h2);
      await b.legacy.touch([['k1', 500]]);
      await a.legacy.touch([['k1', 300]]); // never back
      expect(await a.legacy.get('k1')).toEqual({
        credential: 'cred',
        ownSession: 'own1',
        handle: h2,
        init,
        lastSeen: 500,
      });
      if (backend === postgres)
        await vi.waitFor(() => expect(a.heard).toContainEqual({ kind: 'session', id: 'own1' }));
      expect(await b.legacy.idle(600)).toEqual([{ key: 'k1', ownSession: 'own1' }]);
      await a.legacy.drop('k1');
      expect(await b.legacy.get('k1')).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('prunes idle sessions: not one with activity since, an MCP handle or a pending approval', async () => {
    const [a] = await backend.replicas(1);
    try {
      const sleep = () => new Promise((r) => setTimeout(r, 10));
      const before = new Date(Date.now() - 1000).toISOString();
      for (const id of ['idle', 'quiet', 'busy', 'waiting']) await a.store.activate(id, ['fs'], []);
      const h = await a.handles.mint('cred');
      await a.store.activate(h, ['fs'], []);
      await a.approvals.request({ session_id: 'waiting', kind: 'activate', subject: 'web', reason: 'asks' });
      await sleep();
      const since = new Date().toISOString();
      await sleep();
      a.store.audit({ session_id: 'busy', kind: 'call', subject: 'x', ok: true }, system);
      await a.store.flush();
      // None was created before `before`; since `since`, busy was used, the handle and the approval keep theirs.
      expect(await a.store.pruneIdleSessions(before, 100)).toBe(0);
      expect(await a.store.pruneIdleSessions(since, 1)).toBe(1);
      expect(await a.store.pruneIdleSessions(since, 100)).toBe(1);
      expect(await toolsets(a.store, 'idle')).toBeNull();
      expect(await toolsets(a.store, 'quiet')).toBeNull();
      for (const kept of ['busy', 'waiting', h]) expect(await toolsets(a.store, kept)).toEqual(['fs']);
    } finally {
      await a.close();
    }
  });
});
