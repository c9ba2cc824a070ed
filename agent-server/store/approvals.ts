import { sql } from 'kysely';
import type { Task } from '../contract.ts';
import { held, parsed, type StoreContext, TASK_COLUMNS, WAITING } from './context.ts';
import { heldWrite } from './held-write.ts';
import type { TaskRow, TaskStore } from './interface.ts';
import { toTask } from './interface.ts';

// A task's pauses for a human: what it waits for and the loop state it resumes from, the decision recorded on
// it (by any process), and the one worker that goes on with it.

type ApprovalMethods = Pick<TaskStore, 'pause' | 'unpause' | 'decide' | 'awaiting' | 'queued'>;

export function approvalMethods(c: StoreContext): ApprovalMethods {
  const { db, leases, writes } = c;
  /** Tasks in `status`, oldest first, once every write in flight settled. */
  const tasksIn = async (statuses: readonly Task['status'][]) => {
    await c.guard(writes.settleAll());
    const rows = await db
      .selectFrom('tasks')
      .select(TASK_COLUMNS)
      .where('status', 'in', statuses)
      .orderBy('created_at')
      .orderBy('n')
      .execute();
    return rows as TaskRow[];
  };
  const pause = pauseWrite(c);
  return {
    /**
     * Committed at once, after the events queued before it (a failure throws: a pause nobody can find would
     * never be decided); the lease is let go.
     */
    async pause(taskId, pending, state, steps, webhook, status = 'awaiting_approval') {
      const [p, s] = [JSON.stringify(pending), JSON.stringify(state)];
      await writes.fencedWrite(taskId, {
        one: (fence) => ({
          statement: pause({ task: taskId, fence, now: leases.now(), pending: p, state: s, steps, status }),
          // Its state is whole: the running checkpoint's parts go.
          dropParts: 'all',
          also: webhook && c.webhooks.insert(taskId, webhook),
        }),
      });
      leases.drop(taskId);
      if (webhook) c.webhooks.due();
    },
    // Only while still paused: of several workers resuming it, one goes on (under this worker's lease).
    async unpause(taskId) {
      const row = await writes.afterEvents(
        taskId,
        (on) =>
          on
            .updateTable('tasks')
            .set({
              status: 'running',
              pending_approval: null,
              decision: null,
              lease_owner: leases.holder,
              lease_until: leases.now() + leases.leaseMs,
              fence: sql<number>`fence + 1`,
            })
            .where('task_id', '=', taskId)
            .where('status', 'in', WAITING)
            .returning('fence')
            .executeTakeFirst(),
        true,
      );
      if (!row) return false;
      leases.take(taskId, Number(row.fence));
      c.lastSeq.set(taskId, await lastSeqOf(c, taskId));
      return true;
    },
    async decide(taskId, callId, decision) {
      const res = await db
        .updateTable('tasks')
        .set({ decision: JSON.stringify(decision) })
        .where('task_id', '=', taskId)
        .where('status', '=', 'awaiting_approval')
        .where('decision', 'is', null)
        .where(c.hooks.pendingCallIs(callId))
        .executeTakeFirst();
      const decided = Number(res.numUpdatedRows) === 1;
      // The paused task's worker, wherever it is, looks now.
      if (decided) await c.notifyQueue();
      return decided;
    },
    async awaiting() {
      return (await tasksIn(WAITING)).map((row) => ({
        task: toTask(row),
        pending: parsed(row.pending_approval),
        state: parsed(row.resume_state),
        decision: parsed(row.decision),
        request: parsed(row.request),
      }));
    },
    async queued() {
      return (await tasksIn(['queued'])).map((row) => ({ task: toTask(row), request: parsed(row.request) }));
    },
  };
}

/**
 * The task's last seq, read after its claim committed: a statement of its own (a fresh snapshot) sees every
 * event the previous holder committed, and the fence keeps it from writing more (its check locks the row).
 */
export async function lastSeqOf(c: StoreContext, taskId: string): Promise<number> {
  const row = await c.writes.persist(() =>
    c.db
      .selectFrom('task_events')
      .select((eb) => eb.fn.max('seq').as('last'))
      .where('task_id', '=', taskId)
      .executeTakeFirst(),
  );
  return Number(row?.last ?? 0);
}

/** A task's pause, recorded while it is held (compiled once per store, held-write.ts). */
function pauseWrite(c: StoreContext) {
  return heldWrite<{ pending: string; state: string; steps: number; status: Task['status'] }>(
    c.db,
    c.hooks,
    ['pending', 'state', 'steps', 'status'],
    (db, a) =>
      db
        .updateTable('tasks')
        .set({
          status: a.status,
          pending_approval: a.pending,
          resume_state: a.state,
          checkpoint_messages: null,
          steps: a.steps,
          decision: null,
          lease_owner: null,
          lease_until: null,
        })
        .where(held(a.task, a.fence, a.now)),
  );
}
