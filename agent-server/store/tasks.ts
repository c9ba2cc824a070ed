import { sql } from 'kysely';
import { MAX_THREAD_TURNS } from '../contract.ts';
import { ThreadFull, ThreadGone } from '../errors.ts';
import { QUEUED_PAYLOAD } from './claims.ts';
import { ACTIVE, held, type StoreContext } from './context.ts';
import type { Kdb } from './dialect.ts';
import { END_CHANNEL } from './dialect.ts';
import { heldWrite } from './held-write.ts';
import type { TaskOutcome, TaskStore } from './interface.ts';
import { threadTurnStarts } from './threads.ts';

// Tasks' rows written: recorded, ended, given back to the queue, requeued when their lease lapsed, and pruned by
// retention (their reads are task-reads.ts).

type TaskMethods = Pick<TaskStore, 'createTask' | 'finishTask' | 'release' | 'requeueLapsed' | 'pruneTasks'>;

export function taskMethods(c: StoreContext): TaskMethods {
  const { db, leases, writes } = c;
  /** Tasks, once every write in flight settled (their events need not be in). */
  const listed = () => c.guard(writes.settleAll());
  const end = endWrite(c);
  return {
    createTask: (taskId, sessionId, goal, opts) => createTask(c, taskId, sessionId, goal, opts),
    async finishTask(taskId, o: TaskOutcome, webhook) {
      const args = endArgs(taskId, o);
      // Its call records go, whoever waits for its end in another process (a client of another agent API)
      // hears it, and its webhook POST commits with it.
      await writes.fencedWrite(taskId, {
        one: (fence) => ({
          statement: end({ ...args, fence, now: leases.now() }),
          dropCalls: true,
          dropParts: 'all',
          told: END_CHANNEL,
          also: webhook && c.webhooks.insert(taskId, webhook),
        }),
      });
      leases.drop(taskId);
      c.lastSeq.delete(taskId);
      if (webhook) c.webhooks.due();
    },
    async release(taskId) {
      const fence = leases.fence(taskId);
      // Let go here whatever the database says (a failed write then lapses, and the sweeper requeues it).
      leases.drop(taskId);
      c.lastSeq.delete(taskId);
      if (fence === undefined) return;
      const requeued = await writes.afterEvents(
        taskId,
        async (on) =>
          (
            await on
              .updateTable('tasks')
              .set({ status: 'queued', lease_owner: null, lease_until: null, fence: sql`fence + 1` })
              .where(held(taskId, fence, leases.now()))
              .where('status', '=', 'running')
              .executeTakeFirst()
          ).numUpdatedRows,
        true,
      );
      if (requeued > 0) await c.notifyQueue(QUEUED_PAYLOAD);
    },
    async requeueLapsed(all = false) {
      // Back from an outage, a lease period passes before leases count as lapsed: their holders, who could not
      // renew them either, renew them first (persist), and their tasks go on where they ran.
      // Judged once the writes in flight settled: those may have waited out the outage itself.
      await listed();
      const back = c.hooks.reach?.backAt();
      if (!all && back !== undefined && Date.now() - back < leases.leaseMs) return [];
      const now = leases.now();
      const rows = await db
        .updateTable('tasks')
        .set({ status: 'queued', lease_owner: null, lease_until: null, fence: sql`fence + 1` })
        .where('status', '=', 'running')
        .$if(!all, (q) =>
          q.where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)])),
        )
        .returning('task_id')
        .execute();
      if (rows.length > 0) await c.notifyQueue(QUEUED_PAYLOAD);
      return rows.map((r) => r.task_id);
    },
    pruneTasks: (before, limit) => pruneTasks(c, before, limit),
  };
}

/** Records a task, queued or running here (committed at once: a failure rejects, the task must not run unrecorded). */
async function createTask(
  c: StoreContext,
  taskId: string,
  sessionId: string,
  goal: string,
  opts: Parameters<TaskStore['createTask']>[3] = {},
): Promise<'running' | 'queued'> {
  const { leases, writes } = c;
  c.lastSeq.set(taskId, 0);
  const request = opts.request === undefined ? null : JSON.stringify(opts.request);
  const createdAt = new Date().toISOString();
  const row = {
    task_id: taskId,
    session_id: sessionId,
    thread_id: opts.thread?.id ?? null,
    goal,
    created_at: createdAt,
    request,
  };
  const queuedRow = { ...row, status: 'queued' as const, fence: 0 };
  let queued = opts.queued === true;
  const record = async (on: Kdb) => {
    const thread = opts.thread;
    if (thread) {
      const started = await threadTurnStarts(on, thread, sessionId, createdAt, MAX_THREAD_TURNS);
      if (started === 'gone') throw new ThreadGone(thread.id);
      if (started === 'full') throw new ThreadFull(thread.id, MAX_THREAD_TURNS);
      if (started === 'busy') queued = true;
    }
    const values = queued
      ? queuedRow
      : {
          ...row,
          status: 'running' as const,
          lease_owner: leases.holder,
          lease_until: leases.now() + leases.leaseMs,
          fence: 1,
        };
    await on.insertInto('tasks').values(values).execute();
  };
  // A turn and its thread's row in one transaction: the thread is locked (PostgreSQL) until the turn is in.
  await writes.afterEvents(taskId, (on) =>
    on.isTransaction || !opts.thread ? record(on) : on.transaction().execute(record),
  );
  if (queued) await c.notifyQueue(QUEUED_PAYLOAD);
  else leases.take(taskId, 1);
  return queued ? 'queued' : 'running';
}

/** A task's end, as recorded. */
type EndArgs = Pick<TaskOutcome, 'status' | 'final_answer' | 'error' | 'steps'> & {
  usage: string;
  toolsets_used: string;
  tokens: string;
  finished_at: string;
  transcript: string | null;
};

/** A task's end, recorded while it is held (compiled once per store). */
function endWrite(c: StoreContext) {
  return heldWrite<EndArgs>(
    c.db,
    c.hooks,
    [
      'status',
      'final_answer',
      'error',
      'steps',
      'usage',
      'toolsets_used',
      'tokens',
      'finished_at',
      'transcript',
    ],
    (db, a) =>
      db
        .updateTable('tasks')
        .set({
          status: a.status,
          final_answer: a.final_answer,
          error: a.error,
          steps: a.steps,
          usage: a.usage,
          toolsets_used: a.toolsets_used,
          tokens: a.tokens,
          finished_at: a.finished_at,
          transcript: a.transcript,
          pending_approval: null,
          resume_state: null,
          checkpoint_messages: null,
          decision: null,
          lease_owner: null,
          lease_until: null,
        })
        .where(held(a.task, a.fence, a.now)),
  );
}

/** An end's columns as recorded. */
function endArgs(task: string, o: TaskOutcome): EndArgs & { task: string } {
  return {
    task,
    status: o.status,
    final_answer: o.final_answer,
    error: o.error,
    steps: o.steps,
    usage: JSON.stringify(o.usage),
    toolsets_used: JSON.stringify(o.toolsets_used),
    tokens: JSON.stringify(o.tokens),
    finished_at: new Date().toISOString(),
    transcript: o.transcript === undefined ? null : JSON.stringify(o.transcript),
  };
}

// Retention (lib/db/retention.ts): finished tasks only (running and paused ones are never deleted); their
// events and calls go with them (CASCADE).
async function pruneTasks(c: StoreContext, before: string, limit: number): Promise<number> {
  const { db, writes } = c;
  const listed = () => c.guard(writes.settleAll());
  await listed();
  const res = await db
    .deleteFrom('tasks')
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks')
        .select('task_id')
        .where('created_at', '<', before)
        .where('status', 'not in', ACTIVE)
        .where('finished_at', '<', before)
        // A thread's turns are its conversation: they go with the thread (threads.ts pruneThreads).
        .where(({ or, eb, not, exists, selectFrom }) =>
          or([
            eb('thread_id', 'is', null),
            not(
              exists(
                selectFrom('threads')
                  .select('threads.thread_id')
                  .whereRef('threads.thread_id', '=', 'tasks.thread_id'),
              ),
            ),
          ]),
        )
        .limit(limit),
    )
    .executeTakeFirst();
  return Number(res.numDeletedRows);
}
