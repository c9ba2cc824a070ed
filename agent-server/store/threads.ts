import { ACTIVE, parsed, type StoreContext } from './context.ts';
import type { StoredThread, TaskStore, ThreadTurnRow } from './interface.ts';

// Threads: conversations whose tasks are their turns. A thread's row says who owns it and how its compaction
// stands; its conversation is its ended tasks' transcripts in order, each written with its task's end (so a turn
// is appended, never rewritten). Deleting a thread deletes its tasks; retention deletes idle threads with theirs.

type ThreadMethods = Pick<
  TaskStore,
  | 'createThread'
  | 'getThread'
  | 'listThreads'
  | 'threadTurns'
  | 'threadTranscripts'
  | 'activeTurn'
  | 'saveThreadContext'
  | 'deleteThread'
  | 'pruneThreads'
>;

const THREAD_COLUMNS = [
  'thread_id',
  'session_id',
  'owner',
  'title',
  'webhook',
  'context',
  'created_at',
  'updated_at',
] as const;

type ThreadRow = {
  thread_id: string;
  session_id: string;
  owner: string;
  title: string;
  webhook: string | null;
  context: string | null;
  created_at: string;
  updated_at: string;
};

const toThread = (row: ThreadRow): StoredThread => ({
  ...row,
  webhook: parsed(row.webhook) as StoredThread['webhook'],
  context: parsed(row.context) as StoredThread['context'],
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
    async listThreads(owner, limit, after) {
      const rows = await db
        .selectFrom('threads')
        .select(THREAD_COLUMNS)
        .$if(owner !== null, (q) => q.where('owner', '=', owner as string))
        .$if(after !== undefined, (q) =>
          q.where(
            (eb) => eb.refTuple('updated_at', 'thread_id'),
            '<',
            (eb) =>
              eb
                .selectFrom('threads as a')
                .select(['a.updated_at', 'a.thread_id'])
                .where('a.thread_id', '=', after as string) as never,
          ),
        )
        .orderBy('updated_at', 'desc')
        .orderBy('thread_id', 'desc')
        .limit(limit)
        .execute();
      return rows.map(toThread);
    },
    async threadTurns(threadId) {
      await settled();
      const rows = await db
        .selectFrom('tasks')
        .select(['task_id', 'goal', 'status', 'final_answer', 'error', 'created_at', 'finished_at'])
        .where('thread_id', '=', threadId)
        .orderBy('n')
        .execute();
      return rows as ThreadTurnRow[];
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

/** A thread made, its compaction saved, deleted, and pruned by retention. */
function threadWrites(c: StoreContext) {
  const { db, writes } = c;
  const settled = () => c.guard(writes.settleAll());
  return {
    async createThread(t) {
      await db
        .insertInto('threads')
        .values({
          ...t,
          webhook: t.webhook ? JSON.stringify(t.webhook) : null,
          updated_at: t.created_at,
        })
        .execute();
    },
    async saveThreadContext(threadId, context) {
      await db
        .updateTable('threads')
        .set({ context: JSON.stringify(context) })
        .where('thread_id', '=', threadId)
        .execute();
    },
    async deleteThread(threadId) {
      await settled();
      return db.transaction().execute(async (trx) => {
        const busy = await trx
          .selectFrom('tasks')
          .select('task_id')
          .where('thread_id', '=', threadId)
          .where('status', 'in', ACTIVE)
          .executeTakeFirst();
        if (busy) return { busy: busy.task_id };
        const tasks = await trx.deleteFrom('tasks').where('thread_id', '=', threadId).executeTakeFirst();
        const gone = await trx.deleteFrom('threads').where('thread_id', '=', threadId).executeTakeFirst();
        return Number(gone.numDeletedRows) === 0 ? undefined : { deleted: Number(tasks.numDeletedRows) };
      });
    },
    // Retention: a thread idle since `before` goes with its tasks; one with a task not ended stays.
    async pruneThreads(before, limit) {
      await settled();
      const ids = (
        await db
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
          .execute()
      ).map((r) => r.thread_id);
      if (ids.length === 0) return 0;
      return db.transaction().execute(async (trx) => {
        await trx
          .deleteFrom('tasks')
          .where('thread_id', 'in', ids)
          .where('status', 'not in', ACTIVE)
          .execute();
        const res = await trx
          .deleteFrom('threads')
          .where('thread_id', 'in', ids)
          .where(({ not, exists, selectFrom }) =>
            not(
              exists(
                selectFrom('tasks').select('task_id').whereRef('tasks.thread_id', '=', 'threads.thread_id'),
              ),
            ),
          )
          .executeTakeFirst();
        return Number(res.numDeletedRows);
      });
    },
  } satisfies Partial<ThreadMethods>;
}
