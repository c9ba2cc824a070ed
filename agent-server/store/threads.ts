import { sql } from 'kysely';
import { ACTIVE, parsed, type StoreContext } from './context.ts';
import type { Kdb } from './dialect.ts';
import type { StoredThread, TaskStore, ThreadTurnRow } from './interface.ts';

// Threads: conversations whose tasks are their turns. A thread's row says who owns it; its conversation is its
// ended tasks' transcripts in order, each written with its task's end (a turn is appended, never rewritten), the
// last of them saying how its compaction stands. Deleting a thread deletes its tasks; retention deletes idle
// threads with theirs. A task references its thread (a foreign key): on PostgreSQL recording a turn locks the
// thread's row, so a delete or a prune and a new turn of the same thread happen one after the other.

type ThreadMethods = Pick<
  TaskStore,
  | 'createThread'
  | 'getThread'
  | 'sessionOwners'
  | 'listThreads'
  | 'threadTurns'
  | 'threadTranscripts'
  | 'lastTranscript'
  | 'activeTurn'
  | 'deleteThread'
  | 'pruneThreads'
>;

const THREAD_COLUMNS = [
  'thread_id',
  'session_id',
  'owner',
  'title',
  'webhook',
  'created_at',
  'updated_at',
] as const;

type ThreadRow = Omit<StoredThread, 'webhook'> & { webhook: string | null };

const toThread = (row: ThreadRow): StoredThread => ({
  ...row,
  webhook: parsed(row.webhook) as StoredThread['webhook'],
});

export function threadMethods(c: StoreContext): ThreadMethods {
  return { ...threadReads(c), ...threadWrites(c) };
}

/** A thread, its listing, its turns and its conversation. */
function threadReads(c: StoreContext) {
  const { db, writes } = c;
  /** Reads once every write in flight settled (a task's end carries its transcript). */
  const settled = () => c.guard(writes.settleAll());
  return {
    async getThread(threadId) {
      const row = await db
        .selectFrom('threads')
        .select(THREAD_COLUMNS)
        .where('thread_id', '=', threadId)
        .executeTakeFirst();
      return row ? toThread(row) : undefined;
    },
    async sessionOwners(sessionId) {
      const rows = await db
        .selectFrom('threads')
        .select('owner')
        .distinct()
        .where('session_id', '=', sessionId)
        .limit(16)
        .execute();
      return rows.map((r) => r.owner);
    },
    // Newest first, keyset pages by (created_at, thread_id): a key that does not change, so a page never
    // skips or repeats a thread continued meanwhile.
    async listThreads(owner, limit, after) {
      const rows = await db
        .selectFrom('threads')
        .select(THREAD_COLUMNS)
        .$if(owner !== null, (q) => q.where('owner', '=', owner as string))
        .$if(after !== undefined, (q) =>
          q.where(
            (eb) => eb.refTuple('created_at', 'thread_id'),
            '<',
            (eb) =>
              eb
                .selectFrom('threads as a')
                .select(['a.created_at', 'a.thread_id'])
                .where('a.thread_id', '=', after as string) as never,
          ),
        )
        .orderBy('created_at', 'desc')
        .orderBy('thread_id', 'desc')
        .limit(limit)
        .execute();
      return rows.map(toThread);
    },
    async threadTurns(threadId, limit) {
      await settled();
      return turnsOf(db, threadId, limit);
    },
    async threadTranscripts(threadId) {
      await settled();
      const rows = await db
        .selectFrom('tasks')
        .select(['task_id', 'transcript'])
        .where('thread_id', '=', threadId)
        .where('transcript', 'is not', null)
        .orderBy('n')
        .execute();
      return rows.map((r) => ({ task_id: r.task_id, transcript: parsed(r.transcript) }));
    },
    async lastTranscript(threadId) {
      await settled();
      const row = await db
        .selectFrom('tasks')
        .select('transcript')
        .where('thread_id', '=', threadId)
        .where('transcript', 'is not', null)
        .orderBy('n', 'desc')
        .limit(1)
        .executeTakeFirst();
      return parsed(row?.transcript);
    },
    async activeTurn(threadId) {
      await settled();
      const row = await db
        .selectFrom('tasks')
        .select(['task_id', 'status'])
        .where('thread_id', '=', threadId)
        .where('status', 'in', ACTIVE)
        .orderBy('n')
        .executeTakeFirst();
      return row;
    },
  } satisfies Partial<ThreadMethods>;
}

/** Thrown inside a transaction to roll it back: the thread has a task that has not ended. */
class Busy extends Error {
  readonly taskId: string;
  constructor(taskId: string) {
    super(`thread busy with ${taskId}`);
    this.taskId = taskId;
  }
}

/** A thread made, deleted, and pruned by retention. */
function threadWrites(c: StoreContext) {
  const { db, writes } = c;
  const settled = () => c.guard(writes.settleAll());
  return {
    async createThread(t) {
      await db
        .insertInto('threads')
        .values({ ...t, webhook: t.webhook ? JSON.stringify(t.webhook) : null, updated_at: t.created_at })
        .execute();
    },
    // All or nothing: the thread's ended tasks and the thread go together, or nothing does when a task of it has
    // not ended (one recorded meanwhile included: the foreign key refuses the thread's delete then).
    async deleteThread(threadId) {
      await settled();
      try {
        return await db.transaction().execute(async (trx) => {
          if (!(await lockThread(trx, c, threadId))) return undefined;
          const active = await activeOf(trx, threadId);
          if (active) throw new Busy(active);
          const tasks = await trx.deleteFrom('tasks').where('thread_id', '=', threadId).executeTakeFirst();
          await trx.deleteFrom('threads').where('thread_id', '=', threadId).execute();
          return { deleted: Number(tasks.numDeletedRows) };
        });
      } catch (err) {
        if (err instanceof Busy) return { busy: err.taskId };
        throw err;
      }
    },
    // Retention: a thread idle since `before` goes with its tasks; one with a task not ended stays. The threads
    // are locked first (PostgreSQL), so a turn recorded now waits, then finds its thread gone (ThreadGone).
    async pruneThreads(before, limit) {
      await settled();
      return db.transaction().execute(async (trx) => {
        const ids = (
          await trx
            .selectFrom('threads')
            .select('thread_id')
            .where('updated_at', '<', before)
            .where(({ not, exists, selectFrom }) =>
              not(
                exists(
                  selectFrom('tasks')
                    .select('task_id')
                    .whereRef('tasks.thread_id', '=', 'threads.thread_id')
                    .where('tasks.status', 'in', ACTIVE),
                ),
              ),
            )
            .limit(limit)
            .$if(c.hooks.skipLocked, (q) => q.forUpdate().skipLocked())
            .execute()
        ).map((r) => r.thread_id);
        if (ids.length === 0) return 0;
        await trx.deleteFrom('tasks').where('thread_id', 'in', ids).execute();
        const res = await trx.deleteFrom('threads').where('thread_id', 'in', ids).executeTakeFirst();
        return Number(res.numDeletedRows);
      });
    },
  } satisfies Partial<ThreadMethods>;
}

/** Locks the thread's row for the transaction (PostgreSQL; SQLite's writer holds the database): false when gone. */
async function lockThread(trx: Kdb, c: StoreContext, threadId: string): Promise<boolean> {
  const row = await trx
    .selectFrom('threads')
    .select('thread_id')
    .where('thread_id', '=', threadId)
    .$if(c.hooks.skipLocked, (q) => q.forUpdate())
    .executeTakeFirst();
  return row !== undefined;
}

/** The thread's first task that has not ended. */
async function activeOf(on: Kdb, threadId: string): Promise<string | undefined> {
  const row = await on
    .selectFrom('tasks')
    .select('task_id')
    .where('thread_id', '=', threadId)
    .where('status', 'in', ACTIVE)
    .executeTakeFirst();
  return row?.task_id;
}

/**
 * A thread gets a turn (in the transaction that records it): made with it, or continued — its last activity is
 * now, its row locked until the turn is recorded; `busy` when a turn of it has not ended (the new one must wait
 * for it: of two turns recorded at once, the second sees the first). Refused when the thread is gone or holds
 * `maxTurns` turns.
 */
export async function threadTurnStarts(
  on: Kdb,
  thread: { id: string; made?: { owner: string; title: string; webhook: { url: string } | null } },
  sessionId: string,
  at: string,
  maxTurns: number,
): Promise<'ok' | 'busy' | 'gone' | 'full'> {
  if (thread.made) {
    const { owner, title, webhook } = thread.made;
    await on
      .insertInto('threads')
      .values({
        thread_id: thread.id,
        session_id: sessionId,
        owner,
        title,
        webhook: webhook ? JSON.stringify(webhook) : null,
        created_at: at,
        updated_at: at,
      })
      .execute();
    return 'ok';
  }
  const res = await on
    .updateTable('threads')
    .set({ updated_at: at })
    .where('thread_id', '=', thread.id)
    .where(
      (eb) => eb.selectFrom('tasks').select(sql<number>`count(*)`.as('n')).where('thread_id', '=', thread.id),
      '<',
      maxTurns,
    )
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) > 0) return (await activeOf(on, thread.id)) ? 'busy' : 'ok';
  const there = await on
    .selectFrom('threads')
    .select('thread_id')
    .where('thread_id', '=', thread.id)
    .executeTakeFirst();
  return there ? 'full' : 'gone';
}

/** A thread's last `limit` tasks in order, and how many it has. */
async function turnsOf(db: Kdb, threadId: string, limit: number) {
  const [rows, total] = await Promise.all([
    db
      .selectFrom('tasks')
      .select(['task_id', 'goal', 'status', 'final_answer', 'error', 'created_at', 'finished_at', 'n'])
      .where('thread_id', '=', threadId)
      .orderBy('n', 'desc')
      .limit(limit)
      .execute(),
    db
      .selectFrom('tasks')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('thread_id', '=', threadId)
      .executeTakeFirst(),
  ]);
  const turns = rows.reverse().map(({ n: _n, ...t }) => t as ThreadTurnRow);
  return { turns, total: Number(total?.n ?? 0) };
}
