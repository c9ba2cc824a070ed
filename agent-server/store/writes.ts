import type { QueryResult } from 'kysely';
import { GROUP_COMMIT_MS } from '../../lib/db/sqlite.ts';
import type { DialectHooks, EventRow, Kdb, OneWrite } from './dialect.ts';
import { LeaseLost, type StoreOptions } from './interface.ts';
import type { Leases } from './leases.ts';

// How the store writes, on either database: events are numbered when they are appended and written behind, a
// few milliseconds later, in as few statements as the database takes (or before any read of their task, pause or
// end); each task's writes commit in the order they were made, those of different tasks side by side; a task's
// events and the statement that follows them (a checkpoint, a pause, its end) commit in one transaction.

/** The most events waiting to be written: past it they are written at once. */
const MAX_PENDING = 1000;

export type Writes = ReturnType<typeof createWrites>;

export interface WriteContext {
  db: Kdb;
  hooks: DialectHooks;
  leases: Leases;
  opts: StoreOptions;
  onWriteError: (err: unknown) => void;
  /** Whether the store is closing (a write that waits for an unreachable database gives up). */
  closing: () => boolean;
}

export function createWrites({ db, hooks, leases, opts, onWriteError, closing }: WriteContext) {
  const persist = persistent({ hooks, leases, opts, closing });

  /** Writes event rows; a row whose task is no longer held under its fence is refused (its lease is lost). */
  const insertEvents = async (on: Kdb, rows: EventRow[], retry: boolean) => {
    const written = await hooks.insertEvents(on, rows, leases.now(), retry);
    // A retry's rows may have been written by its first try: a lost lease is found by the next renewal.
    if (retry) return;
    for (const r of rows) if (r.fence !== null && !written.has(r.task_id)) leases.lose(r.task_id, r.fence);
  };

  const { enqueue, tails, queue } = taskOrder();

  /** Writes `rows` on their own (a failure goes to onWriteError: the events are missing from the log). */
  const writeRows = async (rows: EventRow[]) => {
    if (rows.length === 0) return;
    try {
      await persist((retry) => insertEvents(db, rows, retry));
    } catch (err) {
      onWriteError(err);
    }
  };

  /** Writes the pending events of every task, then waits for every write in flight. */
  const flush = async () => {
    await enqueue(null, writeRows);
    await Promise.all(tails.values());
  };

  /** Writes the pending events of `taskId` and waits for its writes in flight: a read of it sees them all. */
  const settle = (taskId: string) => enqueue(taskId, writeRows);

  /** Every write in flight settled (a read of tasks' rows sees them; pending events need not be written). */
  const settleAll = async () => {
    await Promise.all(tails.values());
  };

  /**
   * Statements of task `taskId` committed with its events appended before them (in one transaction, after its
   * earlier writes; without pending events, on their own); resolves to what `work` returns. `durable`: a running
   * task's write, which waits for an unreachable database to return (persist) rather than failing.
   */
  const afterEvents = <T>(taskId: string, work: (on: Kdb) => Promise<T>, durable = false): Promise<T> =>
    enqueue(taskId, (rows) => {
      const once = (retry: boolean) =>
        rows.length === 0
          ? work(db)
          : db.transaction().execute(async (trx) => {
              await insertEvents(trx, rows, retry);
              return work(trx);
            });
      return durable ? persist(once) : once(false);
    });

  const afterWrite = oneWrites({ db, hooks, persist, enqueue, afterEvents });

  const { fencedWrite, fencedBehind } = fencedWrites(afterEvents, afterWrite, leases, onWriteError);

  /** Queues an event row, written within GROUP_COMMIT_MS with the others appended meanwhile. */
  const append = (row: EventRow) => queue(row, () => flush().catch(onWriteError));

  return {
    append,
    persist,
    flush,
    settle,
    settleAll,
    afterEvents,
    fencedWrite,
    fencedBehind,
  };
}

/**
 * Runs `work` until the database answers it: while it cannot be reached (or the statement was rolled back for
 * a deadlock with others), again every few seconds, each time after the leases were renewed (one that lapsed
 * meanwhile is taken back unless another worker took its task, so the writes that waited are not refused for
 * it). A statement's own error is thrown; so is the wait's end when the process stops or the store closes.
 */
function persistent({
  hooks,
  leases,
  opts,
  closing,
}: Pick<WriteContext, 'hooks' | 'leases' | 'opts' | 'closing'>) {
  return async <T>(work: (retry: boolean) => Promise<T>): Promise<T> => {
    for (let attempt = 0; ; attempt++) {
      try {
        if (attempt > 0) await leases.renewNow();
        return await work(attempt > 0);
      } catch (err) {
        if (!hooks.transient(err) || opts.stopping?.aborted || closing()) throw err;
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
      }
    }
  };
}

/** The rows a statement changed. */
const affected = (result: QueryResult<unknown>) => Number(result.numAffectedRows ?? 0);

type AfterEvents = <T>(taskId: string, work: (on: Kdb) => Promise<T>, durable?: boolean) => Promise<T>;
type AfterWrite = (taskId: string, write: OneWrite) => Promise<number>;

/**
 * What a fenced write runs under the fence it was made with: statements (the rows they changed), or one write
 * (`one`), on PostgreSQL a single statement with the task's pending events.
 */
export type FencedWork =
  | ((on: Kdb, fence: number | null) => Promise<number>)
  | { one: (fence: number | null) => OneWrite };

/** Fenced statements: refused (LeaseLost, onLeaseLost) when the task is no longer held under its fence. */
function fencedWrites(
  afterEvents: AfterEvents,
  afterWrite: AfterWrite,
  leases: Leases,
  onWriteError: (err: unknown) => void,
) {
  /** A write behind that failed, by task: its next fenced write throws it. */
  const failedBehind = new Map<string, unknown>();
  const run = (taskId: string, work: FencedWork, fence: number | null) =>
    typeof work === 'function'
      ? afterEvents(taskId, (on) => work(on, fence), true)
      : afterWrite(taskId, work.one(fence));

  /** A fenced statement of `taskId` after the events before it; throws LeaseLost when it changed nothing. */
  const fencedWrite = async (taskId: string, work: FencedWork) => {
    const fence = leases.fence(taskId) ?? null;
    const changed = await run(taskId, work, fence);
    const behind = failedBehind.get(taskId);
    if (behind !== undefined) {
      failedBehind.delete(taskId);
      throw behind;
    }
    leases.check(taskId, fence ?? undefined, changed);
  };

  /** A fenced statement queued in the task's order and not waited for (refused: onLeaseLost; failed: onWriteError). */
  const fencedBehind = (taskId: string, work: FencedWork) => {
    const fence = leases.fence(taskId) ?? null;
    run(taskId, work, fence).then(
      (changed) => {
        if (changed !== 0 || fence === null) return;
        // Refused (the lease lost, or a checkpoint's append that does not go on from its parts): the task's
        // next fenced write throws, so no call starts after a checkpoint never recorded.
        failedBehind.set(taskId, new LeaseLost(taskId));
        leases.lose(taskId, fence);
      },
      (err: unknown) => {
        // The task's next fenced write fails with it: a call must not start on a checkpoint never recorded.
        failedBehind.set(taskId, err);
        onWriteError(err);
      },
    );
  };

  return { fencedWrite, fencedBehind };
}

/**
 * The order of the writes: events pending until written, and each task's writes one after another (those of
 * different tasks side by side).
 */
function taskOrder() {
  let pending: EventRow[] = [];
  let timer: NodeJS.Timeout | null = null;
  /** Each task's last write in flight: a task's writes commit in the order they were made. */
  const tails = new Map<string, Promise<void>>();

  /**
   * Runs `work` with the pending events of task `taskId` (or, for null, of every task: a flush) once the
   * earlier writes of those tasks have settled.
   */
  const enqueue = <T>(taskId: string | null, work: (rows: EventRow[]) => Promise<T>): Promise<T> => {
    let rows: EventRow[];
    if (taskId === null) {
      if (timer) clearTimeout(timer);
      timer = null;
      rows = pending;
      pending = [];
    } else {
      rows = pending.filter((r) => r.task_id === taskId);
      if (rows.length > 0) pending = pending.filter((r) => r.task_id !== taskId);
    }
    const tasks = new Set(rows.map((r) => r.task_id));
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

  /** Queues an event row; `flush` writes them within GROUP_COMMIT_MS, or at once past MAX_PENDING. */
  const queue = (row: EventRow, flush: () => void) => {
    pending.push(row);
    if (pending.length >= MAX_PENDING) {
      flush();
      return;
    }
    timer ??= setTimeout(flush, GROUP_COMMIT_MS);
  };

  return { enqueue, tails, queue };
}

type Enqueue = ReturnType<typeof taskOrder>['enqueue'];

/**
 * One write of a task after its earlier writes, with its pending events: on PostgreSQL one statement
 * (oneWrite), on SQLite plain statements in the events' transaction; resolves to the rows it changed.
 */
function oneWrites(w: {
  db: Kdb;
  hooks: DialectHooks;
  persist: ReturnType<typeof persistent>;
  enqueue: Enqueue;
  afterEvents: AfterEvents;
}): AfterWrite {
  const { db, hooks } = w;
  const plainWrite = async (on: Kdb, taskId: string, write: OneWrite) => {
    const changed = affected(await on.executeQuery(write.statement));
    if (changed && write.dropCalls) await on.deleteFrom('task_calls').where('task_id', '=', taskId).execute();
    if (changed && write.dropParts)
      await on
        .deleteFrom('task_checkpoint_parts')
        .where('task_id', '=', taskId)
        .$if(write.dropParts === 'rest', (q) => q.where('start', '>', 0))
        .execute();
    if (changed && write.also) await on.executeQuery(write.also);
    if (changed && write.told) await hooks.notify(on, write.told, taskId);
    return changed;
  };
  const oneWrite = hooks.oneWrite;
  if (!oneWrite)
    return (taskId, write) =>
      w.afterEvents(
        taskId,
        // With an INSERT that must commit with it: in a transaction even when no events go first.
        (on) =>
          write.also && !on.isTransaction
            ? on.transaction().execute((trx) => plainWrite(trx, taskId, write))
            : plainWrite(on, taskId, write),
        true,
      );
  return (taskId, write) =>
    w.enqueue(taskId, (rows) => w.persist((retry) => oneWrite(db, taskId, write, rows, retry)));
}
