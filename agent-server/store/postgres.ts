import type { QueryResultRow } from 'pg';
import {
  inTransaction,
  listenPostgres,
  migratePostgres,
  type Pool,
  reachabilityOf,
} from '../../lib/db/postgres.ts';
import { StoreUnavailable } from '../../lib/db/reachability.ts';
import type { EventType, Task, TaskEvent } from '../contract.ts';
import {
  type ClaimedRow,
  claimedPayload,
  parseQueueChange,
  postgresClaimSql,
  QUEUED_PAYLOAD,
  toClaimed,
} from './claims.ts';
import type {
  CallRecord,
  QueueChange,
  StoredLogin,
  StoreOptions,
  TaskFilter,
  TaskOutcome,
  TaskRow,
  TaskStore,
} from './interface.ts';
import { likePattern, toTask } from './interface.ts';
import { createLeases, DEFAULT_LEASE_MS } from './leases.ts';
import { MIGRATIONS } from './postgres-schema.ts';

// Tasks and their events in PostgreSQL (DATABASE_URL): the same store as store.ts's SQLite one, the same
// contract suite (tests/agent-server/store/contract.test.ts). Events are numbered when they are appended and
// written behind in one multi-row INSERT a few milliseconds later (or before any read, pause or end); a task's
// last events and its end are committed in one transaction.

export { MIGRATIONS };

/** How long an appended event may wait for others to share its INSERT. */
const WRITE_BEHIND_MS = 5;
/** The most rows one INSERT carries (seven parameters each, under PostgreSQL's 65,535). */
const MAX_ROWS_PER_INSERT = 1000;

/** An event row, and the fence its task is held under here (null: written unfenced). */
type Row = [string, number, EventType, string, number | null, string, number | null];

const COLUMNS =
  'task_id, session_id, goal, status, final_answer, error, steps, usage, toolsets_used, tokens, created_at, finished_at, pending_approval, resume_state, request, decision, fence';

/** The channels other processes hear on: tasks with new events (their ids), and changes to the queue. */
const EVENTS_CHANNEL = 'toolshift_task_events';
const QUEUE_CHANNEL = 'toolshift_task_queue';
const END_CHANNEL = 'toolshift_task_ends';
/** Under PostgreSQL's 8,000-byte notification payload. */
const MAX_PAYLOAD = 7900;

/** A fenced statement's condition on `tasks`: held under fence $2 and its lease not lapsed ($1 is the task). */
const HELD =
  "task_id = $1 AND (($2::bigint IS NULL AND status IN ('queued', 'running', 'awaiting_approval')) OR (fence = $2 AND lease_until > $NOW))";

type Query = (sql: string, values: unknown[]) => Promise<{ rows: unknown[]; rowCount: number | null }>;
type QueryRow = QueryResultRow;

/**
 * A statement's text and values with the leases' clock in them (StoreOptions.now, not the server's): `$NOW` is
 * the time now, `$UNTIL` when a lease taken now ends (milliseconds since the epoch, as `lease_until` holds
 * them), each a parameter after the statement's own, and only if used (PostgreSQL cannot type a parameter no
 * statement names).
 */
function clockedWith(now: () => number, leaseMs: number) {
  return (sql: string, values: unknown[]): [string, unknown[]] => {
    if (!sql.includes('$NOW') && !sql.includes('$UNTIL')) return [sql, values];
    const t = now();
    const params = [...values];
    let text = sql;
    if (text.includes('$NOW')) text = text.replaceAll('$NOW', `$${params.push(t)}::bigint`);
    if (text.includes('$UNTIL')) text = text.replaceAll('$UNTIL', `$${params.push(t + leaseMs)}::bigint`);
    return [text, params];
  };
}

/** SQLSTATEs of a statement rolled back for others running beside it (deadlock, serialization failure). */
const TRANSIENT = new Set(['40P01', '40001']);

/** The PostgreSQL task store on `pool`, its schema migrated first. */
export async function createPostgresTaskStore(pool: Pool, opts: StoreOptions = {}): Promise<TaskStore> {
  const onWriteError =
    opts.onWriteError ?? ((err: unknown) => process.emitWarning(`task store write failed: ${err}`));
  await migratePostgres(pool, 'agent-server', MIGRATIONS);
  // Each statement notes whether the server was reached (/health, 503 for requests); what a running task
  // writes waits for it to return (`persist`).
  const reach = reachabilityOf(pool);
  const clocked = clockedWith(opts.now ?? Date.now, opts.leaseMs ?? DEFAULT_LEASE_MS);
  const db = {
    query: <R extends QueryRow = QueryRow>(sql: string, values: unknown[]) =>
      reach.track(() => pool.query<R>(...clocked(sql, values))),
  };
  /**
   * Runs `work` until the server answers it: while it cannot be reached (or the statement was rolled back for
   * a deadlock with others), again every few seconds, each time after the leases were renewed (one that lapsed
   * meanwhile is taken back unless another worker took its task, so the writes that waited are not refused for
   * it). A statement's own error is thrown; so is the wait's end when the process stops or the store closes.
   */
  const persist = async <T>(work: () => Promise<T>): Promise<T> => {
    for (let attempt = 0; ; attempt++) {
      try {
        if (attempt > 0) await leases.renewNow();
        return await work();
      } catch (err) {
        // A deadlock or serialization failure rolled the statement back: it is tried again as well.
        const transient =
          err instanceof StoreUnavailable || TRANSIENT.has((err as { code?: string }).code ?? '');
        if (!transient || opts.stopping?.aborted || pool.ending) throw err;
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
      }
    }
  };
  /** The last seq given to each task this store appends to. */
  const lastSeq = new Map<string, number>();
  let pending: Row[] = [];
  let timer: NodeJS.Timeout | null = null;
  // A lease is renewed while its fence is the task's, also once it lapsed (the database unreachable for longer
  // than a lease): until another worker claims the task (a new fence) it is still this worker's alone.
  const leases = createLeases(opts, async (held) => {
    const res = await db.query(
      `UPDATE tasks t SET lease_until = $UNTIL
       FROM unnest($1::text[], $2::bigint[]) AS h(task_id, fence)
       WHERE t.task_id = h.task_id AND t.fence = h.fence AND t.status = 'running' RETURNING t.task_id`,
      [held.map(([t]) => t), held.map(([, f]) => f)],
    );
    return res.rows.map((r) => r.task_id as string);
  });
  const lease = '$UNTIL';
  // The database back: the leases first (before the writes that waited for it, and another worker's sweeper).
  const stopRenewingOnReturn = reach.onUp(() => {
    // Gone again at once: the heartbeat and the writes that wait renew them when it is back for good.
    leases.renewNow().catch((err: unknown) => {
      if (!(err instanceof StoreUnavailable)) onWriteError(err);
    });
  });

  /**
   * Inserts event rows; a row whose task is no longer held under its fence is refused (its lease is lost). On
   * a `retry` (the first try may have committed before its connection was lost) rows already there are skipped.
   */
  const insertEvents = async (query: Query, rows: Row[], retry = false) => {
    for (let i = 0; i < rows.length; i += MAX_ROWS_PER_INSERT) {
      const chunk = rows.slice(i, i + MAX_ROWS_PER_INSERT);
      // One array per column (seven parameters whatever the batch's size), unnested into rows.
      const columns = [0, 1, 2, 3, 4, 5, 6].map((c) => chunk.map((row) => row[c]));
      // The rows are refused unless their task is held under their fence; one notification for the batch
      // wakes followers in other processes (its tasks' ids, or `*` for more than a payload holds).
      const res = await query(
        `WITH ins AS (
           INSERT INTO task_events (task_id, seq, type, at, duration_ms, data)
           SELECT v.task_id, v.seq, v.type, v.at, v.duration_ms, v.data
           FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::float8[], $6::text[], $7::bigint[])
             AS v(task_id, seq, type, at, duration_ms, data, fence)
           WHERE v.fence IS NULL OR EXISTS (SELECT 1 FROM tasks t
             WHERE t.task_id = v.task_id AND t.fence = v.fence AND t.lease_until > $NOW FOR SHARE)
           ${retry ? 'ON CONFLICT (task_id, seq) DO NOTHING' : ''}
           RETURNING task_id),
         written AS (SELECT task_id, count(*) AS n FROM ins GROUP BY task_id),
         ids AS (SELECT string_agg(task_id, ',') AS list FROM written),
         sent AS (SELECT pg_notify('${EVENTS_CHANNEL}', CASE WHEN length(list) <= ${MAX_PAYLOAD} THEN list ELSE '*' END)
                  FROM ids WHERE list IS NOT NULL)
         SELECT written.task_id, written.n FROM written LEFT JOIN sent ON true`,
        columns,
      );
      const count = res.rows.reduce((sum: number, r) => sum + Number((r as { n: string }).n), 0);
      // A retry's rows may have been written by its first try: a lost lease is found by the next renewal.
      if (count === chunk.length || retry) continue;
      const written = new Set(res.rows.map((r) => (r as { task_id: string }).task_id));
      for (const [taskId, , , , , , fence] of chunk)
        if (fence !== null && !written.has(taskId)) leases.lose(taskId, fence);
    }
  };
  /** Tells the other processes something changed (`payload`: what, claims.ts; empty: anything). */
  const notifyQueue = async (payload = '') => {
    await db.query('SELECT pg_notify($1, $2)', [QUEUE_CHANNEL, payload]);
  };
  const wake = () => notifyQueue();
  const queueListeners = new Set<(change: QueueChange) => void>();
  /** Listeners of each task's events, by task: a notification names its tasks, each found at once. */
  const eventListeners = new Map<string, Set<() => void>>();
  const endListeners = new Map<string, Set<() => void>>();
  let unlisten: (() => Promise<void>) | undefined;
  /** Starts listening once something wants to hear. */
  const hear = () => {
    unlisten ??= listenPostgres(pool, [EVENTS_CHANNEL, QUEUE_CHANNEL, END_CHANNEL], (channel, payload) => {
      if (channel === QUEUE_CHANNEL) {
        const change = parseQueueChange(payload, leases.holder);
        if (change) for (const l of [...queueListeners]) l(change);
        return;
      }
      const listeners = channel === END_CHANNEL ? endListeners : eventListeners;
      const ids = payload === '*' ? [...listeners.keys()] : payload.split(',');
      for (const id of ids) for (const l of [...(listeners.get(id) ?? [])]) l();
    });
  };
  const listenTo = (listeners: Map<string, Set<() => void>>, taskId: string, listener: () => void) => {
    hear();
    const set = listeners.get(taskId) ?? new Set<() => void>();
    listeners.set(taskId, set);
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && listeners.get(taskId) === set) listeners.delete(taskId);
    };
  };
  /** Each task's last write in flight: a task's writes commit in the order they were made. */
  const tails = new Map<string, Promise<void>>();
  /**
   * Runs `work` with the pending events of task `taskId` (or, for null, of every task: a flush) once the
   * earlier writes of those tasks have settled. Writes of different tasks run side by side (up to the pool).
   */
  const enqueue = <T>(taskId: string | null, work: (rows: Row[]) => Promise<T>): Promise<T> => {
    let rows: Row[];
    if (taskId === null) {
      if (timer) clearTimeout(timer);
      timer = null;
      rows = pending;
      pending = [];
    } else {
      rows = pending.filter((r) => r[0] === taskId);
      if (rows.length > 0) pending = pending.filter((r) => r[0] !== taskId);
    }
    const tasks = new Set(rows.map((r) => r[0]));
    if (taskId !== null) tasks.add(taskId);
    const result = Promise.all([...tasks].map((t) => tails.get(t))).then(() => work(rows));
    // Settled either way (the caller has `result`'s error), and then forgotten unless a later write followed.
    const forget = () => {
      for (const t of tasks) if (tails.get(t) === settled) tails.delete(t);
    };
    const settled: Promise<void> = result.then(forget, forget);
    for (const t of tasks) tails.set(t, settled);
    return result;
  };
  /** Writes the pending events, then waits for every write in flight: a read after it sees them all. */
  const flush = async () => {
    await enqueue(null, async (rows) => {
      if (rows.length === 0) return;
      let attempt = 0;
      try {
        await persist(() => insertEvents((sql, values) => db.query(sql, values), rows, attempt++ > 0));
      } catch (err) {
        onWriteError(err);
      }
    });
    await Promise.all(tails.values());
  };
  /**
   * Statements of task `taskId` committed with its events appended before them (in one transaction, after its
   * earlier writes; without pending events, on their own); resolves to what `work` returns. `durable`: a
   * running task's write, which waits for an unreachable database to return (persist) rather than failing.
   */
  const afterEvents = <T>(taskId: string, work: (query: Query) => Promise<T>, durable = false): Promise<T> =>
    enqueue(taskId, (rows) => {
      const once = (retry: boolean) =>
        rows.length === 0
          ? work((text, params) => db.query(text, params))
          : reach.track(() =>
              inTransaction(pool, async (client) => {
                const query: Query = (text, params) => client.query(...clocked(text, params));
                await insertEvents(query, rows, retry);
                return work(query);
              }),
            );
      let attempt = 0;
      return durable ? persist(() => once(attempt++ > 0)) : once(false);
    });
  /** One statement of task `values[0]` after its events before it; resolves to its rows. */
  const statement = <T>(sql: string, values: unknown[], durable = false) =>
    afterEvents(
      values[0] as string,
      async (query) => {
        return (await query(sql, values)).rows as T[];
      },
      durable,
    );
  /** A fenced statement ($1 the task, $2 its fence) after the events before it; throws LeaseLost when refused. */
  const fencedWrite = async (
    taskId: string,
    work: (query: Query, fence: number | null) => Promise<number>,
  ) => {
    const fence = leases.fence(taskId) ?? null;
    const changed = await afterEvents(taskId, (query) => work(query, fence), true);
    const behind = failedBehind.get(taskId);
    if (behind !== undefined) {
      failedBehind.delete(taskId);
      throw behind;
    }
    leases.check(taskId, fence ?? undefined, changed);
  };
  /** A fenced statement queued in the task's order and not waited for (refused: onLeaseLost; failed: onWriteError). */
  const fencedBehind = (taskId: string, work: (query: Query, fence: number | null) => Promise<number>) => {
    const fence = leases.fence(taskId) ?? null;
    afterEvents(taskId, (query) => work(query, fence), true).then(
      (changed) => {
        if (changed === 0 && fence !== null) leases.lose(taskId, fence);
      },
      (err: unknown) => {
        // The task's next fenced write fails with it: a call must not start on a checkpoint never recorded.
        failedBehind.set(taskId, err);
        onWriteError(err);
      },
    );
  };
  /** A write behind that failed, by task: its next fenced write throws it. */
  const failedBehind = new Map<string, unknown>();
  /** Tasks in `status`, oldest first. */
  const tasksIn = (status: 'queued' | 'awaiting_approval') =>
    read<TaskRow>(`SELECT ${COLUMNS} FROM tasks t WHERE status = $1 ORDER BY created_at, n`, [status]);
  /** Rows, once the events written behind are in; while the database is unreachable, StoreUnavailable at once. */
  const read = async <T>(sql: string, values: unknown[]): Promise<T[]> => {
    await reach.guard(flush());
    return (await db.query(sql, values)).rows as T[];
  };
  /**
   * Rows of one task, once its own events written behind are in (a read waits for no other task's writes);
   * while the database is unreachable, StoreUnavailable at once.
   */
  const readTask = async <T>(taskId: string, sql: string, values: unknown[]): Promise<T[]> => {
    await reach.guard(
      enqueue(taskId, async (rows) => {
        if (rows.length === 0) return;
        let attempt = 0;
        await persist(() => insertEvents((q, v) => db.query(q, v), rows, attempt++ > 0)).catch(onWriteError);
      }),
    );
    return (await db.query(sql, values)).rows as T[];
  };
  /** Rows a running task needs (what it goes on from): they wait for an unreachable database to return. */
  const readDurable = async <T>(sql: string, values: unknown[]): Promise<T[]> =>
    persist(async () => (await db.query(sql, values)).rows as T[]);
  type CallRow = { idx: number; call_id: string; finished: boolean; result: string | null };
  const callsOf = async (taskId: string, durable = false): Promise<CallRecord[]> => {
    const sql = 'SELECT idx, call_id, finished, result FROM task_calls WHERE task_id = $1 ORDER BY idx';
    const rows = durable
      ? await readDurable<CallRow>(sql, [taskId])
      : await readTask<CallRow>(taskId, sql, [taskId]);
    return rows.map((c) => ({
      index: c.idx,
      call_id: c.call_id,
      finished: c.finished,
      result: c.result === null ? null : JSON.parse(c.result),
    }));
  };
  /** Claimed (or resumed) under `fence`: its numbering goes on after its last event, whoever wrote it. */
  const claimed = (taskId: string, fence: number, last: number | null) => {
    leases.take(taskId, fence);
    lastSeq.set(taskId, last ?? 0);
  };
  /**
   * The task's last seq, read after its claim committed: a statement of its own (a fresh snapshot) sees every
   * event the previous holder committed, and the fence keeps it from writing more (its check locks the row).
   */
  const lastSeqOf = async (taskId: string) =>
    Number(
      (
        await readDurable<{ last: string | null }>(
          'SELECT MAX(seq) AS last FROM task_events WHERE task_id = $1',
          [taskId],
        )
      )[0]?.last ?? 0,
    );

  return {
    holder: leases.holder,
    fenceOf: (taskId: string) => leases.fence(taskId),
    embedded: false,
    async createTask(taskId, sessionId, goal, opts = {}) {
      lastSeq.set(taskId, 0);
      const request = opts.request === undefined ? null : JSON.stringify(opts.request);
      // Committed at once (a failure rejects: the task must not run unrecorded), with other tasks' queued events.
      if (opts.queued) {
        await statement(
          `INSERT INTO tasks (task_id, session_id, goal, status, created_at, request, fence)
           VALUES ($1, $2, $3, 'queued', $4, $5, 0)`,
          [taskId, sessionId, goal, new Date().toISOString(), request],
        );
        await notifyQueue(QUEUED_PAYLOAD);
      } else {
        await statement(
          `INSERT INTO tasks (task_id, session_id, goal, status, created_at, request, lease_owner, lease_until, fence)
           VALUES ($1, $2, $3, 'running', $4, $5, $6, ${lease}, 1)`,
          [taskId, sessionId, goal, new Date().toISOString(), request, leases.holder],
        );
        leases.take(taskId, 1);
      }
    },
    appendEvent(taskId, type, durationMs, data): TaskEvent {
      const last = lastSeq.get(taskId);
      if (last === undefined) {
        throw new Error(
          `task ${taskId} was not created or claimed through this store: its events cannot be numbered`,
        );
      }
      const seq = last + 1;
      lastSeq.set(taskId, seq);
      const at = new Date().toISOString();
      pending.push([taskId, seq, type, at, durationMs, JSON.stringify(data), leases.fence(taskId) ?? null]);
      timer ??= setTimeout(() => void flush(), WRITE_BEHIND_MS);
      return { seq, type, at, duration_ms: durationMs, data } as TaskEvent;
    },
    // Only while still queued: of several workers claiming it, one gets the row (the others skip it at once).
    async claim(taskId) {
      const [row] = await statement<{
        fence: string;
        resume_state: string | null;
        request: string | null;
      }>(
        `UPDATE tasks SET status = 'running', lease_owner = $2, lease_until = ${lease}, fence = fence + 1
         WHERE task_id = (SELECT task_id FROM tasks WHERE task_id = $1 AND status = 'queued' FOR UPDATE SKIP LOCKED)
         RETURNING fence, resume_state, request`,
        [taskId, leases.holder],
      );
      if (!row) return undefined;
      claimed(taskId, Number(row.fence), await lastSeqOf(taskId));
      // The process that queued it (and perhaps streams it) hears that it was claimed (or, missing that, sees it
      // at its next poll: the claim stands, and the task is run here).
      await notifyQueue(claimedPayload(leases.holder, [taskId])).catch((err: unknown) => onWriteError(err));
      return {
        resumed: Number(row.fence) > 1,
        state: row.resume_state ? JSON.parse(row.resume_state) : null,
        calls: await callsOf(taskId, true),
        request: row.request ? JSON.parse(row.request) : null,
      };
    },
    async claimNext(limit) {
      if (limit <= 0) return [];
      const rows = (await db.query(postgresClaimSql(QUEUE_CHANNEL), [limit, leases.holder]))
        .rows as ClaimedRow[];
      const claims = toClaimed(rows, () => []);
      for (const { task } of claims) {
        const row = rows.find((r) => r.task_id === task.task_id) as ClaimedRow;
        claimed(task.task_id, Number(row.fence), row.last_seq === null ? null : Number(row.last_seq));
      }
      return claims;
    },
    async queued() {
      return (await tasksIn('queued')).map((row) => ({
        task: toTask(row),
        request: row.request ? JSON.parse(row.request) : null,
      }));
    },
    // Written behind, in the task's order: the call that starts next waits for it (callStarted), before it runs.
    async checkpoint(taskId, state, steps) {
      fencedBehind(taskId, async (query, fence) => {
        const res = await query(`UPDATE tasks SET resume_state = $3, steps = $4 WHERE ${HELD}`, [
          taskId,
          fence,
          JSON.stringify(state),
          steps,
        ]);
        if (res.rowCount) await query('DELETE FROM task_calls WHERE task_id = $1', [taskId]);
        return res.rowCount ?? 0;
      });
    },
    async callStarted(taskId, index, callId) {
      await fencedWrite(
        taskId,
        async (query, fence) =>
          (
            await query(
              `INSERT INTO task_calls (task_id, idx, call_id, finished) SELECT $1, $3, $4, false
             WHERE EXISTS (SELECT 1 FROM tasks WHERE ${HELD} FOR SHARE)
             ON CONFLICT (task_id, idx) DO UPDATE SET call_id = EXCLUDED.call_id, finished = false, result = NULL`,
              [taskId, fence, index, callId],
            )
          ).rowCount ?? 0,
      );
    },
    // Written behind, as the checkpoint (lost in a crash, the call only looks unfinished: the safe side).
    // Written behind, as the checkpoint (lost in a crash, the call only looks unfinished: the safe side).
    async callFinished(taskId, index, callId, result) {
      fencedBehind(
        taskId,
        async (query, fence) =>
          (
            await query(
              `INSERT INTO task_calls (task_id, idx, call_id, finished, result) SELECT $1, $3, $4, true, $5
             WHERE EXISTS (SELECT 1 FROM tasks WHERE ${HELD} FOR SHARE)
             ON CONFLICT (task_id, idx) DO UPDATE SET call_id = EXCLUDED.call_id, finished = true, result = EXCLUDED.result`,
              [taskId, fence, index, callId, JSON.stringify(result)],
            )
          ).rowCount ?? 0,
      );
    },
    async pause(taskId, pendingApproval, state, steps) {
      await fencedWrite(
        taskId,
        async (query, fence) =>
          (
            await query(
              `UPDATE tasks SET status = 'awaiting_approval', pending_approval = $3, resume_state = $4, steps = $5,
             decision = NULL, lease_owner = NULL, lease_until = NULL WHERE ${HELD}`,
              [taskId, fence, JSON.stringify(pendingApproval), JSON.stringify(state), steps],
            )
          ).rowCount ?? 0,
      );
      leases.drop(taskId);
    },
    // Only while still paused: of several workers resuming it, one goes on.
    async unpause(taskId) {
      const [row] = await statement<{ fence: string }>(
        `UPDATE tasks SET status = 'running', pending_approval = NULL, decision = NULL, lease_owner = $2,
         lease_until = ${lease}, fence = fence + 1 WHERE task_id = $1 AND status = 'awaiting_approval'
         RETURNING fence`,
        [taskId, leases.holder],
        true,
      );
      if (!row) return false;
      claimed(taskId, Number(row.fence), await lastSeqOf(taskId));
      return true;
    },
    async decide(taskId, callId, decision) {
      const res = await db.query(
        `UPDATE tasks SET decision = $3 WHERE task_id = $1 AND status = 'awaiting_approval' AND decision IS NULL
         AND (pending_approval::json ->> 'call_id') = $2`,
        [taskId, callId, JSON.stringify(decision)],
      );
      if (res.rowCount === 1) await wake();
      return res.rowCount === 1;
    },
    async awaiting() {
      return (await tasksIn('awaiting_approval')).map((row) => ({
        task: toTask(row),
        pending: row.pending_approval ? JSON.parse(row.pending_approval) : null,
        state: row.resume_state ? JSON.parse(row.resume_state) : null,
        decision: row.decision ? JSON.parse(row.decision) : null,
        request: row.request ? JSON.parse(row.request) : null,
      }));
    },
    calls: callsOf,
    async finishTask(taskId, o: TaskOutcome) {
      await fencedWrite(taskId, async (query, fence) => {
        const res = await query(
          `UPDATE tasks SET status = $3, final_answer = $4, error = $5, steps = $6, usage = $7, toolsets_used = $8,
           tokens = $9, finished_at = $10, pending_approval = NULL, resume_state = NULL, decision = NULL,
           lease_owner = NULL, lease_until = NULL WHERE ${HELD}`,
          [
            taskId,
            fence,
            o.status,
            o.final_answer,
            o.error,
            o.steps,
            JSON.stringify(o.usage),
            JSON.stringify(o.toolsets_used),
            JSON.stringify(o.tokens),
            new Date().toISOString(),
          ],
        );
        if (res.rowCount) {
          await query('DELETE FROM task_calls WHERE task_id = $1', [taskId]);
          // Whoever waits for its end in another process (a client of another agent API) hears it.
          await query('SELECT pg_notify($1, $2)', [END_CHANNEL, taskId]);
        }
        return res.rowCount ?? 0;
      });
      leases.drop(taskId);
      lastSeq.delete(taskId);
    },
    async release(taskId) {
      const fence = leases.fence(taskId);
      leases.drop(taskId);
      lastSeq.delete(taskId);
      if (fence === undefined) return;
      const requeued = await statement(
        `UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_until = NULL, fence = fence + 1
         WHERE ${HELD} AND status = 'running' RETURNING task_id`,
        [taskId, fence],
        true,
      );
      if (requeued.length > 0) await notifyQueue(QUEUED_PAYLOAD);
    },
    async getTask(taskId): Promise<Task | undefined> {
      const [row] = await readTask<TaskRow>(taskId, `SELECT ${COLUMNS} FROM tasks WHERE task_id = $1`, [
        taskId,
      ]);
      return row ? toTask(row) : undefined;
    },
    async events(taskId, after = 0) {
      const rows = await readTask<Omit<TaskEvent, 'data'> & { data: string }>(
        taskId,
        'SELECT seq, type, at, duration_ms, data FROM task_events WHERE task_id = $1 AND seq > $2 ORDER BY seq',
        [taskId, after],
      );
      return rows.map((e) => ({ ...e, data: JSON.parse(e.data) }) as TaskEvent);
    },
    async recentTasks(limit, filter: TaskFilter = {}) {
      const values: unknown[] = [limit];
      const where: string[] = [];
      if (filter.status) where.push(`status = $${values.push(filter.status)}`);
      if (filter.goal) where.push(`goal ILIKE $${values.push(likePattern(filter.goal))}`);
      if (filter.after)
        where.push(
          `(created_at, n) < (SELECT created_at, n FROM tasks WHERE task_id = $${values.push(filter.after)})`,
        );
      const rows = await read<TaskRow>(
        `SELECT ${COLUMNS} FROM tasks ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY created_at DESC, n DESC LIMIT $1`,
        values,
      );
      return rows.map(toTask);
    },
    async countTasks() {
      const rows = await read<{ status: Task['status']; n: string }>(
        'SELECT status, COUNT(*) AS n FROM tasks GROUP BY status',
        [],
      );
      return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    },
    async saveLogin(login) {
      await db.query(
        'INSERT INTO console_logins (id_hash, kind, role, sealed, expires_at) VALUES ($1, $2, $3, $4, $5)',
        [login.id_hash, login.kind, login.role, login.sealed, login.expires_at],
      );
    },
    async login(idHash) {
      const [row] = (
        await db.query<StoredLogin>(
          "SELECT * FROM console_logins WHERE id_hash = $1 AND kind = 'session' AND expires_at > $2",
          [idHash, Date.now()],
        )
      ).rows;
      return row && { ...row, expires_at: Number(row.expires_at) };
    },
    async takeLoginCode(idHash) {
      const [row] = (
        await db.query<StoredLogin>(
          "DELETE FROM console_logins WHERE id_hash = $1 AND kind = 'code' RETURNING *",
          [idHash],
        )
      ).rows;
      return row && Number(row.expires_at) > Date.now()
        ? { ...row, expires_at: Number(row.expires_at) }
        : undefined;
    },
    async dropLogin(idHash) {
      await db.query('DELETE FROM console_logins WHERE id_hash = $1', [idHash]);
    },
    async pruneLogins(limit) {
      const res = await db.query(
        'DELETE FROM console_logins WHERE id_hash IN (SELECT id_hash FROM console_logins WHERE expires_at <= $1 LIMIT $2)',
        [Date.now(), limit],
      );
      return res.rowCount ?? 0;
    },
    async requeueLapsed(all = false) {
      // Back from an outage, a lease period passes before leases count as lapsed: their holders, who could not
      // renew them either, renew them first (persist), and their tasks go on where they ran.
      const back = reach.backAt();
      if (!all && back !== undefined && Date.now() - back < leases.leaseMs) return [];
      const rows = await read<{ task_id: string }>(
        `UPDATE tasks SET status = 'queued', lease_owner = NULL, lease_until = NULL, fence = fence + 1
         WHERE status = 'running' AND ($1 OR lease_until IS NULL OR lease_until <= $NOW) RETURNING task_id`,
        [all],
      );
      if (rows.length > 0) await notifyQueue(QUEUED_PAYLOAD);
      return rows.map((r) => r.task_id);
    },
    onLeaseLost: (listener) => void leases.onLost(listener),
    onQueueChange(listener) {
      hear();
      queueListeners.add(listener);
      return () => queueListeners.delete(listener);
    },
    onTaskEvents: (taskId, listener) => listenTo(eventListeners, taskId, listener),
    onTaskEnd: (taskId, listener) => listenTo(endListeners, taskId, listener),
    wake,
    async pruneTasks(before, limit) {
      await flush();
      const res = await db.query(
        `DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE created_at < $1
         AND status NOT IN ('queued', 'running', 'awaiting_approval') AND finished_at < $1 LIMIT $2)`,
        [before, limit],
      );
      return res.rowCount ?? 0;
    },
    flush,
    async close() {
      leases.stop();
      stopRenewingOnReturn();
      await flush();
      await unlisten?.();
      await pool.end();
      reach.forget();
    },
  };
}
