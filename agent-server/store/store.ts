import { createWriteBatch, type Db, migrateSqlite } from '../../lib/db/sqlite.ts';
import type { EventType, Task, TaskEvent } from '../contract.ts';
import { type ClaimedRow, SQLITE_CLAIM_SQL, toClaimed } from './claims.ts';
import {
  type CallRecord,
  likePattern,
  type StoredLogin,
  type StoreOptions,
  type TaskFilter,
  type TaskOutcome,
  type TaskRow,
  type TaskStore,
  toTask,
} from './interface.ts';
import { createLeases } from './leases.ts';
import { MIGRATIONS } from './sqlite-schema.ts';

export type { TaskOutcome, TaskStore };

// Tasks and their events in SQLite, the embedded default (postgres.ts is the same store on PostgreSQL).

export { MIGRATIONS };

/**
 * The SQLite task store: creates or migrates the tables and returns the task queries. Event records are
 * committed together a few milliseconds after they are written (lib/db/sqlite.ts createWriteBatch): a step's five
 * or six rows in one commit, every read flushing first, a failure given to `onWriteError`. A task's creation,
 * claim, checkpoint, calls, pause and end are committed at once and reject when they fail. Every method does
 * its work in the turn it is called in (the promises only carry the result). Leases are kept as in the
 * PostgreSQL store (one process uses the file, so they matter little here, but the contract is the same).
 */
export function createTaskStore(db: Db, opts: StoreOptions = {}): TaskStore {
  const onWriteError =
    opts.onWriteError ?? ((err: unknown) => process.emitWarning(`task store write failed: ${err}`));
  migrateSqlite(db, 'agent-server', MIGRATIONS);
  /** A fenced write's condition: the task is held under this fence and its lease has not lapsed. */
  const HELD = 'task_id = @task AND fence = @fence AND lease_until > @now';
  const q = {
    insert: db.prepare(
      `INSERT INTO tasks (task_id, session_id, goal, status, created_at, request, lease_owner, lease_until, fence)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    claim: db.prepare<{ task: string; holder: string; until: number }, TaskRow>(
      `UPDATE tasks SET status = 'running', lease_owner = @holder, lease_until = @until, fence = fence + 1
       WHERE task_id = @task AND status = 'queued' RETURNING *`,
    ),
    claimNext: db.prepare<{ limit: number; holder: string; until: number }, ClaimedRow>(SQLITE_CLAIM_SQL),
    queued: db.prepare<[], TaskRow>("SELECT * FROM tasks WHERE status = 'queued' ORDER BY created_at, rowid"),
    addEvent: db.prepare<[string, number, EventType, string, number | null, string]>(
      'INSERT INTO task_events (task_id, seq, type, at, duration_ms, data) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    held: db.prepare<{ task: string; fence: number; now: number }, { held: number }>(
      `SELECT 1 AS held FROM tasks WHERE ${HELD}`,
    ),
    lastSeq: db.prepare<[string], { seq: number | null }>(
      'SELECT MAX(seq) AS seq FROM task_events WHERE task_id = ?',
    ),
    checkpoint: db.prepare(`UPDATE tasks SET resume_state = @state, steps = @steps WHERE ${HELD}`),
    dropCalls: db.prepare('DELETE FROM task_calls WHERE task_id = ?'),
    callStarted: db.prepare(
      `INSERT OR REPLACE INTO task_calls (task_id, idx, call_id, finished, result)
       SELECT @task, @idx, @call, 0, NULL WHERE EXISTS (SELECT 1 FROM tasks WHERE ${HELD})`,
    ),
    callFinished: db.prepare(
      `INSERT OR REPLACE INTO task_calls (task_id, idx, call_id, finished, result)
       SELECT @task, @idx, @call, 1, @result WHERE EXISTS (SELECT 1 FROM tasks WHERE ${HELD})`,
    ),
    calls: db.prepare<[string], { idx: number; call_id: string; finished: number; result: string | null }>(
      'SELECT idx, call_id, finished, result FROM task_calls WHERE task_id = ? ORDER BY idx',
    ),
    finish: db.prepare(
      `UPDATE tasks SET status = @status, final_answer = @answer, error = @error, steps = @steps, usage = @usage,
       toolsets_used = @used, tokens = @tokens, finished_at = @at, pending_approval = NULL, resume_state = NULL,
       decision = NULL, lease_owner = NULL, lease_until = NULL
       WHERE task_id = @task AND ((@fence IS NULL AND status IN ('queued', 'running', 'awaiting_approval'))
       OR (fence = @fence AND lease_until > @now))`,
    ),
    release: db.prepare(
      `UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_until = NULL, fence = fence + 1
       WHERE ${HELD} AND status = 'running'`,
    ),
    get: db.prepare<[string], TaskRow>('SELECT * FROM tasks WHERE task_id = ?'),
    events: db.prepare<[string, number], Omit<TaskEvent, 'data'> & { data: string }>(
      'SELECT seq, type, at, duration_ms, data FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq',
    ),
    recent: db.prepare<[number], TaskRow>('SELECT * FROM tasks ORDER BY created_at DESC, rowid DESC LIMIT ?'),
    requeue: db.prepare<{ all: number; now: number }, { task_id: string }>(
      `UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_until = NULL, fence = fence + 1
       WHERE status = 'running' AND (@all = 1 OR lease_until IS NULL OR lease_until <= @now) RETURNING task_id`,
    ),
    pause: db.prepare(
      `UPDATE tasks SET status = 'awaiting_approval', pending_approval = @pending, resume_state = @state,
       steps = @steps, decision = NULL, lease_owner = NULL, lease_until = NULL
       WHERE task_id = @task AND ((@fence IS NULL AND status IN ('queued', 'running', 'awaiting_approval'))
       OR (fence = @fence AND lease_until > @now))`,
    ),
    unpause: db.prepare<{ task: string; holder: string; until: number }, { fence: number }>(
      `UPDATE tasks SET status = 'running', pending_approval = NULL, decision = NULL, lease_owner = @holder,
       lease_until = @until, fence = fence + 1 WHERE task_id = @task AND status = 'awaiting_approval' RETURNING fence`,
    ),
    decide: db.prepare(
      `UPDATE tasks SET decision = @decision WHERE task_id = @task AND status = 'awaiting_approval'
       AND decision IS NULL AND json_extract(pending_approval, '$.call_id') = @call`,
    ),
    awaiting: db.prepare<[], TaskRow>(
      "SELECT * FROM tasks WHERE status = 'awaiting_approval' ORDER BY created_at",
    ),
    renew: db.prepare(
      'UPDATE tasks SET lease_until = @until WHERE task_id = @task AND fence = @fence AND lease_until > @now',
    ),
    // Finished tasks only (running and paused ones are never deleted); their events go with them (CASCADE).
    counts: db.prepare<[], { status: Task['status']; n: number }>(
      'SELECT status, COUNT(*) AS n FROM tasks GROUP BY status',
    ),
    saveLogin: db.prepare<StoredLogin>(
      'INSERT INTO console_logins (id_hash, kind, role, sealed, expires_at) VALUES (@id_hash, @kind, @role, @sealed, @expires_at)',
    ),
    login: db.prepare<[string, number], StoredLogin>(
      "SELECT * FROM console_logins WHERE id_hash = ? AND kind = 'session' AND expires_at > ?",
    ),
    takeCode: db.prepare<[string], StoredLogin>(
      "DELETE FROM console_logins WHERE id_hash = ? AND kind = 'code' RETURNING *",
    ),
    dropLogin: db.prepare<[string]>('DELETE FROM console_logins WHERE id_hash = ?'),
    pruneLogins: db.prepare<[number, number]>(
      'DELETE FROM console_logins WHERE id_hash IN (SELECT id_hash FROM console_logins WHERE expires_at <= ? LIMIT ?)',
    ),
    prune: db.prepare(
      `DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE created_at < ?
       AND status NOT IN ('queued', 'running', 'awaiting_approval') AND finished_at < ? LIMIT ?)`,
    ),
  };
  /** Whether each task was held under a fence, as checked in the commit being written (once, not per row). */
  const fenceChecked = new Map<string, boolean>();
  /** The listing's statement for the parts a filter has (prepared once per combination). */
  const byFilter = new Map<string, ReturnType<typeof db.prepare<Record<string, unknown>, TaskRow>>>();
  const filtered = (f: TaskFilter) => {
    const key = `${!!f.status}${!!f.goal}${!!f.after}`;
    let statement = byFilter.get(key);
    if (!statement) {
      const where = [
        ...(f.status ? ['status = @status'] : []),
        ...(f.goal ? ["goal LIKE @goal ESCAPE '\\'"] : []),
        ...(f.after
          ? ['(created_at, rowid) < (SELECT created_at, rowid FROM tasks WHERE task_id = @after)']
          : []),
      ];
      statement = db.prepare<Record<string, unknown>, TaskRow>(
        `SELECT * FROM tasks WHERE ${where.join(' AND ')} ORDER BY created_at DESC, rowid DESC LIMIT @limit`,
      );
      byFilter.set(key, statement);
    }
    return statement;
  };
  const batch = createWriteBatch(db, onWriteError, { onBegin: () => fenceChecked.clear() });
  const renew = db.transaction((held: [string, number][]) => {
    const now = leases.now();
    const until = now + leases.leaseMs;
    return held
      .filter(([task, fence]) => q.renew.run({ task, fence, now, until }).changes === 1)
      .map(([t]) => t);
  });
  const leases = createLeases(opts, async (held) => {
    batch.flush();
    return renew(held);
  });
  /** The parameters of a fenced write of `taskId`. */
  const fenced = (taskId: string) => ({
    task: taskId,
    fence: leases.fence(taskId) ?? null,
    now: leases.now(),
  });
  /** Runs a fenced write (after the events before it); throws LeaseLost when it changed nothing. */
  const write = (taskId: string, run: (params: ReturnType<typeof fenced>) => number) => {
    const outcome = queueWrite(taskId, run);
    batch.flush();
    outcome();
  };
  /**
   * The same, committed with the other fenced writes of this turn of the event loop: under many tasks the
   * calls that start together share one commit instead of one each. Resolves once committed.
   */
  const writeSoon = async (taskId: string, run: (params: ReturnType<typeof fenced>) => number) => {
    const outcome = queueWrite(taskId, run);
    committing ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        committing = null;
        batch.flush();
        resolve();
      }),
    );
    await committing;
    outcome();
  };
  let committing: Promise<void> | null = null;
  /** Queues a fenced write (after the events before it: one commit, not two); the returned check throws its failure. */
  const queueWrite = (taskId: string, run: (params: ReturnType<typeof fenced>) => number) => {
    const params = fenced(taskId);
    let changed: number | undefined;
    let failed: { err: unknown } | undefined;
    batch.add(() => {
      try {
        changed = run(params);
      } catch (err) {
        failed = { err };
      }
    });
    return () => {
      const behind = failedBehind.get(taskId);
      if (behind !== undefined) {
        failedBehind.delete(taskId);
        throw behind;
      }
      if (failed) throw failed.err;
      // The batch's commit failed before it got to this write (onWriteError has the cause).
      if (changed === undefined) throw new Error(`the task store could not record a write of task ${taskId}`);
      leases.check(taskId, params.fence ?? undefined, changed);
    };
  };
  /** A fenced write committed with the next batch (a refusal goes to onLeaseLost, a failure to onWriteError). */
  const writeBehind = (taskId: string, run: (params: ReturnType<typeof fenced>) => number) => {
    const params = fenced(taskId);
    batch.add(() => {
      try {
        if (run(params) === 0 && params.fence !== null) leases.lose(taskId, params.fence);
      } catch (err) {
        // The task's next fenced write fails with it: a call must not start on a checkpoint never recorded.
        failedBehind.set(taskId, err);
        onWriteError(err);
      }
    });
  };
  /** A write behind that failed, by task: its next fenced write throws it. */
  const failedBehind = new Map<string, unknown>();
  /** The last seq given to each task this process has events for (read from the table on first use). */
  const lastSeq = new Map<string, number>();
  const claimed = (taskId: string, fence: number) => {
    leases.take(taskId, fence);
    lastSeq.set(taskId, q.lastSeq.get(taskId)?.seq ?? 0);
  };
  const callsOf = (taskId: string): CallRecord[] =>
    q.calls.all(taskId).map((c) => ({
      index: c.idx,
      call_id: c.call_id,
      finished: c.finished === 1,
      result: c.result === null ? null : JSON.parse(c.result),
    }));
  return {
    holder: leases.holder,
    fenceOf: (taskId: string) => leases.fence(taskId),
    embedded: true,
    /** Records a new task, committed at once (a failure throws: the task must not run unrecorded). */
    async createTask(taskId, sessionId, goal, opts = {}) {
      const request = opts.request === undefined ? null : JSON.stringify(opts.request);
      const now = new Date();
      if (opts.queued)
        q.insert.run(taskId, sessionId, goal, 'queued', now.toISOString(), request, null, null, 0);
      else {
        const until = leases.now() + leases.leaseMs;
        q.insert.run(taskId, sessionId, goal, 'running', now.toISOString(), request, leases.holder, until, 1);
        leases.take(taskId, 1);
      }
      lastSeq.set(taskId, 0);
    },
    async claim(taskId) {
      batch.flush();
      const row = q.claim.get({ task: taskId, holder: leases.holder, until: leases.now() + leases.leaseMs });
      if (!row) return undefined;
      claimed(taskId, Number(row.fence));
      return {
        resumed: Number(row.fence) > 1,
        state: row.resume_state ? JSON.parse(row.resume_state) : null,
        calls: callsOf(taskId),
        request: row.request ? JSON.parse(row.request) : null,
      };
    },
    async claimNext(limit) {
      if (limit <= 0) return [];
      batch.flush();
      const until = leases.now() + leases.leaseMs;
      const rows = q.claimNext.all({ limit, holder: leases.holder, until });
      for (const row of rows) {
        leases.take(row.task_id, Number(row.fence));
        lastSeq.set(row.task_id, Number(row.last_seq ?? 0));
      }
      return toClaimed(rows, callsOf);
    },
    async queued() {
      batch.flush();
      return q.queued.all().map((row) => ({
        task: toTask(row),
        request: row.request ? JSON.parse(row.request) : null,
      }));
    },
    appendEvent(taskId, type, durationMs, data): TaskEvent {
      const at = new Date().toISOString();
      let seq = lastSeq.get(taskId);
      if (seq === undefined) {
        batch.flush();
        seq = q.lastSeq.get(taskId)?.seq ?? 0;
      }
      seq += 1;
      lastSeq.set(taskId, seq);
      const text = JSON.stringify(data);
      const fence = leases.fence(taskId);
      const n = seq;
      batch.add(() => {
        if (fence !== undefined) {
          const key = `${taskId} ${fence}`;
          let held = fenceChecked.get(key);
          if (held === undefined) {
            held = q.held.get({ task: taskId, fence, now: leases.now() }) !== undefined;
            fenceChecked.set(key, held);
          }
          // Refused: this worker no longer holds the task (another claimed it, or the lease lapsed).
          if (!held) return leases.lose(taskId, fence);
        }
        q.addEvent.run(taskId, n, type, at, durationMs, text);
      });
      // The emitter typed `data` by its `type` (Emit); stored rows are read back as what they were written as.
      return { seq, type, at, duration_ms: durationMs, data } as TaskEvent;
    },
    // Written behind: the call that starts next commits them (callStarted), before it runs.
    async checkpoint(taskId, state, steps) {
      const text = JSON.stringify(state);
      writeBehind(taskId, (p) => {
        const changed = q.checkpoint.run({ ...p, state: text, steps }).changes;
        if (changed) q.dropCalls.run(taskId);
        return changed;
      });
    },
    async callStarted(taskId, index, callId) {
      await writeSoon(taskId, (p) => q.callStarted.run({ ...p, idx: index, call: callId }).changes);
    },
    async callFinished(taskId, index, callId, result) {
      const text = JSON.stringify(result);
      writeBehind(
        taskId,
        (p) => q.callFinished.run({ ...p, idx: index, call: callId, result: text }).changes,
      );
    },
    /**
     * Records that the task waits for `pending`, with the loop state to resume from: committed at once, after
     * the events queued before it (a failure throws: a pause nobody can find would never be decided).
     */
    async pause(taskId, pending, state, steps) {
      const [p, s] = [JSON.stringify(pending), JSON.stringify(state)];
      write(taskId, (params) => q.pause.run({ ...params, pending: p, state: s, steps }).changes);
      leases.drop(taskId);
    },
    /** The task runs again (its approval was decided), under this worker's lease; committed at once. */
    async unpause(taskId) {
      batch.flush();
      const row = q.unpause.get({
        task: taskId,
        holder: leases.holder,
        until: leases.now() + leases.leaseMs,
      });
      if (!row) return false;
      claimed(taskId, Number(row.fence));
      return true;
    },
    async decide(taskId, callId, decision) {
      return q.decide.run({ task: taskId, call: callId, decision: JSON.stringify(decision) }).changes === 1;
    },
    /** Tasks paused for an approval, with what they wait for and their saved loop state. */
    async awaiting() {
      batch.flush();
      return q.awaiting.all().map((row) => ({
        task: toTask(row),
        pending: row.pending_approval ? JSON.parse(row.pending_approval) : null,
        state: row.resume_state ? JSON.parse(row.resume_state) : null,
        decision: row.decision ? JSON.parse(row.decision) : null,
        request: row.request ? JSON.parse(row.request) : null,
      }));
    },
    async calls(taskId) {
      batch.flush();
      return callsOf(taskId);
    },
    /** Stores how the task ended: committed at once, after the events queued before it (a failure throws). */
    async finishTask(taskId, o) {
      write(taskId, (p) =>
        db.transaction(() => {
          const changed = q.finish.run({
            ...p,
            status: o.status,
            answer: o.final_answer,
            error: o.error,
            steps: o.steps,
            usage: JSON.stringify(o.usage),
            used: JSON.stringify(o.toolsets_used),
            tokens: JSON.stringify(o.tokens),
            at: new Date().toISOString(),
          }).changes;
          if (changed) q.dropCalls.run(taskId);
          return changed;
        })(),
      );
      leases.drop(taskId);
      lastSeq.delete(taskId);
    },
    async release(taskId) {
      const params = fenced(taskId);
      // Let go here whatever the database says (a failed write then lapses, and the sweeper requeues it).
      leases.drop(taskId);
      lastSeq.delete(taskId);
      batch.flush();
      if (params.fence !== null) q.release.run(params);
    },
    async getTask(taskId: string): Promise<Task | undefined> {
      batch.flush();
      const row = q.get.get(taskId);
      return row ? toTask(row) : undefined;
    },
    /** The task's events in order; with `after`, only those whose seq is greater (for resuming a stream). */
    async events(taskId: string, after = 0): Promise<TaskEvent[]> {
      batch.flush();
      return q.events.all(taskId, after).map((e) => ({ ...e, data: JSON.parse(e.data) }));
    },
    async recentTasks(limit: number, filter: TaskFilter = {}): Promise<Task[]> {
      batch.flush();
      if (!filter.status && !filter.goal && !filter.after) return q.recent.all(limit).map(toTask);
      return filtered(filter)
        .all({ ...filter, goal: filter.goal && likePattern(filter.goal), limit })
        .map(toTask);
    },
    async countTasks() {
      return Object.fromEntries(q.counts.all().map((r) => [r.status, r.n]));
    },
    async saveLogin(login) {
      q.saveLogin.run(login);
    },
    login: async (idHash) => q.login.get(idHash, Date.now()),
    async takeLoginCode(idHash) {
      const row = q.takeCode.get(idHash);
      return row && row.expires_at > Date.now() ? row : undefined;
    },
    async dropLogin(idHash) {
      q.dropLogin.run(idHash);
    },
    pruneLogins: async (limit) => q.pruneLogins.run(Date.now(), limit).changes,
    async requeueLapsed(all = false) {
      batch.flush();
      return q.requeue.all({ all: all ? 1 : 0, now: leases.now() }).map((r) => r.task_id);
    },
    onLeaseLost: (listener) => void leases.onLost(listener),
    // One process uses the file: nothing to hear, no one to wake.
    onQueueChange: () => () => {},
    onTaskEvents: () => () => {},
    onTaskEnd: () => () => {},
    wake: async () => {},
    /** Retention (lib/db/retention.ts): deletes at most `limit` tasks finished before `before` (ISO), with their events. */
    async pruneTasks(before: string, limit: number): Promise<number> {
      batch.flush();
      return q.prune.run(before, before, limit).changes;
    },
    /** Commits the queued writes now (for a reader outside this store, such as another process). */
    flush: async () => batch.flush(),
    async close() {
      leases.stop();
      batch.flush();
      db.close();
    },
  };
}
