import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  LeaseLost,
  type StoreOptions,
  type TaskOutcome,
  type TaskStore,
} from '../../../agent-server/store/interface.ts';
import { createPostgresTaskStore, createTaskStore } from '../../../agent-server/store/store.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// The agent-server's store contract, run on both implementations: SQLite (the embedded default) and
// PostgreSQL (DATABASE_URL), the latter on the real server the test run starts (tests/helpers/postgres.ts).

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** A way to open a store, and to open it again on the same data (a restart). */
interface Backend {
  name: string;
  /** A fresh place for data; `open` opens a store on it (again and again). */
  fresh(): Promise<{
    open: (opts?: StoreOptions) => Promise<TaskStore>;
    /** The names of the migrations applied, in order (lib/db/kysely.ts migrate, `agent_migrations`). */
    migrations: () => Promise<string[]>;
  }>;
}

const sqlite: Backend = {
  name: 'SQLite',
  async fresh() {
    const dir = await mkdtemp(path.join(tmpdir(), 'task-store-'));
    dirs.push(dir);
    const file = path.join(dir, 'agent.db');
    return {
      open: async (opts) => createTaskStore(openDatabase(file), opts),
      migrations: async () => {
        const db = new Database(file, { readonly: true });
        try {
          return db
            .prepare<[], { name: string }>('SELECT name FROM agent_migrations ORDER BY name')
            .all()
            .map((r) => r.name);
        } finally {
          db.close();
        }
      },
    };
  },
};

const postgres: Backend = {
  name: 'PostgreSQL',
  async fresh() {
    const url = await freshDatabase('tasks');
    return {
      open: (opts) => createPostgresTaskStore(openPostgres(url, 'test', { max: 4 }), opts),
      migrations: async () => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          const res = await client.query('SELECT name FROM agent_migrations ORDER BY name');
          return res.rows.map((r) => r.name as string);
        } finally {
          await client.end();
        }
      },
    };
  },
};

const outcome = (status: TaskOutcome['status'], answer: string | null = null): TaskOutcome => ({
  status,
  final_answer: answer,
  error: status === 'failed' ? 'it broke' : null,
  steps: 2,
  usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  toolsets_used: ['file_system_tools'],
  tokens: { tool_definitions: 100, messages: 50, all_toolsets: 900 } as unknown as TaskOutcome['tokens'],
});

describe.each([sqlite, postgres])('the task store on $name', (backend) => {
  it('records a task, numbers its events from 1, and reads them back in order (after a seq too)', async () => {
    const store = await (await backend.fresh()).open();
    try {
      await store.createTask('task_a', 'ses_1', 'write a poem');
      const appended = [1, 2, 3].map((i) => store.appendEvent('task_a', 'model_call', i * 10, { i }));
      expect(appended.map((e) => e.seq)).toEqual([1, 2, 3]);
      const events = await store.events('task_a');
      expect(events.map((e) => [e.seq, e.type, e.duration_ms, e.data])).toEqual([
        [1, 'model_call', 10, { i: 1 }],
        [2, 'model_call', 20, { i: 2 }],
        [3, 'model_call', 30, { i: 3 }],
      ]);
      expect((await store.events('task_a', 2)).map((e) => e.seq)).toEqual([3]);
      expect(await store.getTask('task_a')).toMatchObject({
        task_id: 'task_a',
        session_id: 'ses_1',
        goal: 'write a poem',
        status: 'running',
        final_answer: null,
      });
      expect(await store.getTask('task_missing')).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it('lists recent tasks newest first, ties in the order they were created', async () => {
    const store = await (await backend.fresh()).open();
    try {
      for (const id of ['task_1', 'task_2', 'task_3']) await store.createTask(id, 'ses', id);
      expect((await store.recentTasks(2)).map((t) => t.task_id)).toEqual(['task_3', 'task_2']);
    } finally {
      await store.close();
    }
  });

  it('ends a task with its outcome, its last events committed with it', async () => {
    const store = await (await backend.fresh()).open();
    try {
      await store.createTask('task_f', 'ses', 'finish');
      store.appendEvent('task_f', 'task_finished', 5, { status: 'completed' });
      await store.finishTask('task_f', outcome('completed', 'done'));
      const task = await store.getTask('task_f');
      expect(task).toMatchObject({
        status: 'completed',
        final_answer: 'done',
        steps: 2,
        usage: { total_tokens: 15 },
        toolsets_used: ['file_system_tools'],
      });
      expect(task?.finished_at).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect((await store.events('task_f')).map((e) => e.type)).toEqual(['task_finished']);
    } finally {
      await store.close();
    }
  });

  it('pauses a task with what it waits for, and a restarted store resumes it and goes on numbering', async () => {
    const place = await backend.fresh();
    const first = await place.open();
    await first.createTask('task_p', 'ses', 'needs a human');
    first.appendEvent('task_p', 'task_started', null, {});
    first.appendEvent('task_p', 'approval_needed', null, { approval_id: 'apr_1' });
    await first.pause('task_p', { approval_id: 'apr_1', call_id: 'call_1' }, { messages: ['m'] }, 2);
    // A waiting task shows the steps it took before it paused, not 0.
    expect(await first.getTask('task_p')).toMatchObject({ status: 'awaiting_approval', steps: 2 });
    await first.close();

    const second = await place.open();
    try {
      const awaiting = await second.awaiting();
      expect(awaiting.map((a) => [a.task.task_id, a.pending, a.state])).toEqual([
        ['task_p', { approval_id: 'apr_1', call_id: 'call_1' }, { messages: ['m'] }],
      ]);
      await second.unpause('task_p');
      expect(second.appendEvent('task_p', 'approval_decided', null, { approved: true }).seq).toBe(3);
      expect((await second.getTask('task_p'))?.status).toBe('running');
      expect(await second.awaiting()).toEqual([]);
      expect((await second.events('task_p')).map((e) => e.seq)).toEqual([1, 2, 3]);
    } finally {
      await second.close();
    }
  });

  it('requeues the tasks a stopped process left running; a claim goes on from their checkpoint and calls', async () => {
    const place = await backend.fresh();
    const first = await place.open();
    await first.createTask('task_run', 'ses', 'running', { request: { maxSteps: 3 } });
    first.appendEvent('task_run', 'task_started', null, {});
    await first.checkpoint('task_run', { step: 1 }, 1);
    expect((await first.getTask('task_run'))?.steps).toBe(1);
    await first.callStarted('task_run', 0, 'call_a');
    await first.callFinished('task_run', 0, 'call_a', { message: 'a done' });
    await first.callStarted('task_run', 1, 'call_b');
    await first.createTask('task_wait', 'ses', 'paused');
    await first.pause('task_wait', { approval_id: 'a' }, {}, 1);
    await first.createTask('task_done', 'ses', 'done');
    await first.finishTask('task_done', outcome('completed', 'ok'));
    await first.close();

    const second = await place.open();
    try {
      // The embedded store's previous process is gone: every running task; a shared one's only when lapsed.
      expect(await second.requeueLapsed(second.embedded)).toEqual(second.embedded ? ['task_run'] : []);
      if (!second.embedded) expect(await second.requeueLapsed(true)).toEqual(['task_run']);
      expect((await second.queued()).map((q) => [q.task.task_id, q.request])).toEqual([
        ['task_run', { maxSteps: 3 }],
      ]);
      expect((await second.getTask('task_wait'))?.status).toBe('awaiting_approval');
      expect((await second.getTask('task_done'))?.status).toBe('completed');
      const claim = await second.claim('task_run');
      expect(claim).toEqual({
        resumed: true,
        state: { step: 1 },
        request: { maxSteps: 3 },
        calls: [
          { index: 0, call_id: 'call_a', finished: true, result: { message: 'a done' } },
          { index: 1, call_id: 'call_b', finished: false, result: null },
        ],
      });
      expect(await second.claim('task_run')).toBeUndefined();
      expect(second.appendEvent('task_run', 'task_resumed', null, {}).seq).toBe(2);
      // A new checkpoint (the next reply) leaves the last reply's call records behind.
      await second.checkpoint('task_run', { step: 2 }, 1);
      expect(await second.calls('task_run')).toEqual([]);
      await second.finishTask('task_run', outcome('completed', 'at last'));
      expect((await second.events('task_run')).map((e) => [e.seq, e.type])).toEqual([
        [1, 'task_started'],
        [2, 'task_resumed'],
      ]);
    } finally {
      await second.close();
    }
  });

  it('renews a lease while its worker lives, and requeues it once the worker stops renewing it', async () => {
    const place = await backend.fresh();
    // The workers' clock moves when the test says (the heartbeat's timer is real: every 30 ms here). Each time
    // the slow worker reads it is noted: its renewals, once nothing else of it runs.
    let t = Date.now();
    const read: number[] = [];
    const slow = await place.open({
      holder: 'slow',
      leaseMs: 90,
      now: () => {
        read.push(t);
        return t;
      },
    });
    const other = await place.open({ holder: 'other', leaseMs: 60_000, now: () => t });
    try {
      await slow.createTask('task_l', 'ses', 'lapses');
      slow.appendEvent('task_l', 'task_started', null, {});
      await slow.checkpoint('task_l', { by: 'slow' }, 1);
      await slow.flush();
      // Past the first lease, but renewed on the way: each step is under a lease, and a heartbeat follows it.
      // A renewal at the new time read it once; a second read means the first renewal ended (never two at once).
      for (let i = 0; i < 4; i++) {
        t += 60;
        await vi.waitFor(() => expect(read.filter((at) => at === t).length).toBeGreaterThanOrEqual(2));
      }
      expect(await other.requeueLapsed()).toEqual([]);
      // The worker stops (its heartbeat with it): the lease lapses and the sweeper requeues the task.
      await slow.close();
      t += 60;
      expect(await other.requeueLapsed()).toEqual([]);
      t += 60;
      expect(await other.requeueLapsed()).toEqual(['task_l']);
      const claim = await other.claim('task_l');
      expect(claim).toMatchObject({ resumed: true, state: { by: 'slow' } });
      expect(other.appendEvent('task_l', 'task_resumed', null, {}).seq).toBe(2);
      expect((await other.events('task_l')).map((e) => e.seq)).toEqual([1, 2]);
    } finally {
      await other.close();
    }
  });

  it('never counts a lease lost whose task it ended or paused while a renewal was under way', async () => {
    // A heartbeat every 100 ms reads the leases held, then renews them: a task ended or paused between the two is
    // still this worker's (its fence unchanged) until it lets the lease go. Many ends race many heartbeats.
    const store = await (await backend.fresh()).open({ holder: 'busy', leaseMs: 300 });
    const lost: string[] = [];
    store.onLeaseLost((id) => lost.push(id));
    try {
      for (let round = 0; round < 20; round++) {
        const ids = Array.from({ length: 10 }, (_, i) => `task_${round}_${i}`);
        await Promise.all(ids.map((id) => store.createTask(id, 'ses', 'races')));
        await Promise.all(
          ids.map((id, i) =>
            i % 2 === 0
              ? store.finishTask(id, outcome('completed', 'done'))
              : store.pause(id, { approval_id: `a_${id}`, call_id: `c_${id}` }, { at: id }, 1),
          ),
        );
      }
      await new Promise((r) => setTimeout(r, 40));
      expect(lost).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('refuses the events, checkpoint, calls and end of a worker whose task was claimed by another', async () => {
    const place = await backend.fresh();
    const a = await place.open({ holder: 'a', leaseMs: 60_000 });
    const b = await place.open({ holder: 'b', leaseMs: 60_000 });
    const lost: string[] = [];
    a.onLeaseLost((id) => lost.push(id));
    try {
      await a.createTask('task_f', 'ses', 'fenced');
      a.appendEvent('task_f', 'task_started', null, {});
      await a.checkpoint('task_f', { by: 'a' }, 1);
      await a.flush();
      // The sweeper judged a's lease lapsed (a froze) and b claimed the task: a higher fence.
      expect(await b.requeueLapsed(true)).toEqual(['task_f']);
      expect((await b.claim('task_f'))?.state).toEqual({ by: 'a' });
      b.appendEvent('task_f', 'task_resumed', null, { by: 'b' });
      await b.flush();
      // a wakes up and goes on writing: every write is refused, and a hears its lease is gone.
      a.appendEvent('task_f', 'model_call', null, { by: 'a, late' });
      await a.flush();
      expect(lost).toEqual(['task_f']);
      // The checkpoint is written behind: the call that would start after it is refused, with it.
      await a.checkpoint('task_f', { by: 'a, late' }, 1);
      await expect(a.callStarted('task_f', 0, 'call_late')).rejects.toBeInstanceOf(LeaseLost);
      await a.callFinished('task_f', 0, 'call_late', { message: 'late' });
      await a.flush();
      expect((await b.claim('task_f')) ?? null).toBeNull();
      await expect(a.finishTask('task_f', outcome('completed', 'a says done'))).rejects.toBeInstanceOf(
        LeaseLost,
      );
      b.appendEvent('task_f', 'model_call', null, { by: 'b' });
      const events = await b.events('task_f');
      expect(events.map((e) => [e.seq, e.data])).toEqual([
        [1, {}],
        [2, { by: 'b' }],
        [3, { by: 'b' }],
      ]);
      expect(await b.getTask('task_f')).toMatchObject({ status: 'running', final_answer: null });
      expect((await b.claim('task_f')) ?? null).toBeNull();
      expect(await b.calls('task_f')).toEqual([]);
      await b.finishTask('task_f', outcome('completed', 'b did it'));
      expect((await a.getTask('task_f'))?.final_answer).toBe('b did it');
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('records a human decision on a paused call once', async () => {
    const store = await (await backend.fresh()).open();
    try {
      await store.createTask('task_d', 'ses', 'decide');
      await store.pause('task_d', { call_id: 'call_1', kind: 'unknown_outcome' }, { s: 1 }, 1);
      expect(await store.decide('task_d', 'call_other', { approved: true })).toBe(false);
      expect(await store.decide('task_d', 'call_1', { approved: false, skipped: 'no' })).toBe(true);
      expect(await store.decide('task_d', 'call_1', { approved: true })).toBe(false);
      expect((await store.awaiting()).map((a) => a.decision)).toEqual([{ approved: false, skipped: 'no' }]);
      expect(await store.unpause('task_d')).toBe(true);
      expect(await store.awaiting()).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('lists tasks by status and by text in the goal, a page after another, and counts them by status', async () => {
    const store = await (await backend.fresh()).open();
    try {
      for (let i = 1; i <= 7; i++)
        await store.createTask(`task_${i}`, 'ses', `goal ${i}${i % 2 ? ' Odd_50%' : ''}`);
      for (const id of ['task_1', 'task_2', 'task_3']) await store.finishTask(id, outcome('completed'));
      await store.finishTask('task_4', outcome('failed'));
      const ids = (tasks: { task_id: string }[]) => tasks.map((t) => t.task_id);
      expect(ids(await store.recentTasks(10, { status: 'completed' }))).toEqual([
        'task_3',
        'task_2',
        'task_1',
      ]);
      // Case-insensitive for ASCII; `%` and `_` are text, not wildcards.
      expect(ids(await store.recentTasks(10, { goal: 'odd_50%' }))).toEqual([
        'task_7',
        'task_5',
        'task_3',
        'task_1',
      ]);
      expect(ids(await store.recentTasks(10, { goal: 'd_5' }))).toEqual([
        'task_7',
        'task_5',
        'task_3',
        'task_1',
      ]);
      expect(ids(await store.recentTasks(10, { goal: '_%' }))).toEqual([]);
      expect(ids(await store.recentTasks(10, { goal: 'odd', status: 'completed' }))).toEqual([
        'task_3',
        'task_1',
      ]);
      // Keyset pages: each starts after the previous page's last task, none repeated or skipped.
      const first = await store.recentTasks(3);
      const second = await store.recentTasks(3, { after: first.at(-1)?.task_id });
      const third = await store.recentTasks(3, { after: second.at(-1)?.task_id });
      expect([...ids(first), ...ids(second), ...ids(third)]).toEqual([
        'task_7',
        'task_6',
        'task_5',
        'task_4',
        'task_3',
        'task_2',
        'task_1',
      ]);
      expect(await store.countTasks()).toEqual({ completed: 3, failed: 1, running: 3 });
    } finally {
      await store.close();
    }
  });

  it('keeps console logins until they expire or end, and gives a login code once', async () => {
    const place = await backend.fresh();
    const store = await place.open();
    const other = await place.open();
    try {
      const soon = Date.now() + 60_000;
      await store.saveLogin({
        id_hash: 'h_session',
        kind: 'session',
        role: 'admin',
        sealed: 'x',
        expires_at: soon,
      });
      await store.saveLogin({
        id_hash: 'h_old',
        kind: 'session',
        role: 'viewer',
        sealed: 'y',
        expires_at: Date.now() - 1,
      });
      await store.saveLogin({ id_hash: 'h_code', kind: 'code', role: 'user', sealed: 'z', expires_at: soon });
      // Another process on the same data sees the login (one on SQLite is the same file, reopened).
      expect(await other.login('h_session')).toEqual({
        id_hash: 'h_session',
        kind: 'session',
        role: 'admin',
        sealed: 'x',
        expires_at: soon,
      });
      expect(await store.login('h_old')).toBeUndefined();
      // A code is not a session, and is taken once across processes.
      expect(await store.login('h_code')).toBeUndefined();
      const taken = await Promise.all([store.takeLoginCode('h_code'), other.takeLoginCode('h_code')]);
      expect(taken.filter(Boolean).map((t) => t?.role)).toEqual(['user']);
      await store.dropLogin('h_session');
      expect(await other.login('h_session')).toBeUndefined();
      expect(await store.pruneLogins(10)).toBe(1);
      expect(await store.pruneLogins(10)).toBe(0);
    } finally {
      await store.close();
      await other.close();
    }
  });

  it('prunes only finished tasks older than the cut-off, with their events', async () => {
    const store = await (await backend.fresh()).open();
    try {
      await store.createTask('task_old', 'ses', 'old');
      store.appendEvent('task_old', 'model_call', 1, {});
      await store.finishTask('task_old', outcome('completed'));
      await store.createTask('task_running', 'ses', 'still running');
      const future = new Date(Date.now() + 60_000).toISOString();
      expect(await store.pruneTasks(future, 10)).toBe(1);
      expect(await store.getTask('task_old')).toBeUndefined();
      expect(await store.events('task_old')).toEqual([]);
      expect((await store.getTask('task_running'))?.status).toBe('running');
      expect(await store.pruneTasks(new Date(0).toISOString(), 10)).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('records its schema version, and opening it again migrates nothing and keeps the data', async () => {
    const place = await backend.fresh();
    const first = await place.open();
    await first.createTask('task_kept', 'ses', 'kept');
    await first.close();
    const versions = await place.migrations();
    expect(versions[0]).toBe('001_one_schema');
    expect(versions).toEqual([...versions].sort());
    const second = await place.open();
    try {
      expect(await place.migrations()).toEqual(versions);
      expect((await second.getTask('task_kept'))?.goal).toBe('kept');
    } finally {
      await second.close();
    }
  });
});

describe('the SQLite task store on a database made before migrations were recorded', () => {
  it('adds the columns it lacks and keeps its tasks', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'task-store-old-'));
    dirs.push(dir);
    const file = path.join(dir, 'agent.db');
    const old = new Database(file);
    old.exec(`CREATE TABLE tasks (task_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, goal TEXT NOT NULL,
      status TEXT NOT NULL, final_answer TEXT, error TEXT, steps INTEGER NOT NULL DEFAULT 0,
      usage TEXT NOT NULL DEFAULT '{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}',
      toolsets_used TEXT NOT NULL DEFAULT '[]', created_at TEXT NOT NULL, finished_at TEXT);
      CREATE TABLE task_events (task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
      seq INTEGER NOT NULL, type TEXT NOT NULL, at TEXT NOT NULL, duration_ms REAL, data TEXT NOT NULL,
      PRIMARY KEY (task_id, seq));
      INSERT INTO tasks (task_id, session_id, goal, status, created_at) VALUES ('task_old', 's', 'from before', 'running', '2026-01-01T00:00:00.000Z');`);
    old.close();
    const store = createTaskStore(openDatabase(file));
    try {
      expect((await store.getTask('task_old'))?.goal).toBe('from before');
      await store.pause('task_old', { approval_id: 'a' }, { s: 1 }, 1);
      expect((await store.awaiting()).map((a) => a.state)).toEqual([{ s: 1 }]);
    } finally {
      await store.close();
    }
  });
});
