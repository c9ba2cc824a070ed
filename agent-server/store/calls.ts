import { held, parsed, type StoreContext } from './context.ts';
import type { Kdb } from './dialect.ts';
import type { CallRecord, TaskStore } from './interface.ts';
import type { FencedWork } from './writes.ts';

// Where a task goes on from if its worker stops: its checkpoint (a reply whose tool calls are about to run) and
// the records of those calls, started and finished.

type CallMethods = Pick<TaskStore, 'checkpoint' | 'callStarted' | 'callFinished' | 'calls'>;

/** The call records of `taskId`'s checkpointed reply, as read on `on`. */
export async function callsOf(on: Kdb, taskId: string): Promise<CallRecord[]> {
  const rows = await on
    .selectFrom('task_calls')
    .select(['idx', 'call_id', 'finished', 'result'])
    .where('task_id', '=', taskId)
    .orderBy('idx')
    .execute();
  return rows.map((r) => ({
    index: r.idx,
    call_id: r.call_id,
    finished: Number(r.finished) === 1,
    result: parsed(r.result),
  }));
}

export function callMethods(c: StoreContext): CallMethods {
  const { leases, writes } = c;
  const now = () => leases.now();
  return {
    // Written behind, in the task's order: the call that starts next waits for it (callStarted), before it runs.
    async checkpoint(taskId, state, steps) {
      writes.fencedBehind(taskId, checkpointWork(c, taskId, JSON.stringify(state), steps));
    },
    async callStarted(taskId, index, callId) {
      await writes.fencedWrite(taskId, {
        one: (on, fence) => ({
          statement: recordCall(
            on,
            { taskId, fence, now: now(), lockRow: c.hooks.lockOnCheck },
            { index, callId },
          ),
        }),
      });
    },
    // Written behind, as the checkpoint (lost in a crash, the call only looks unfinished: the safe side).
    async callFinished(taskId, index, callId, result) {
      const text = JSON.stringify(result);
      writes.fencedBehind(taskId, {
        one: (on, fence) => ({
          statement: recordCall(
            on,
            { taskId, fence, now: now(), lockRow: c.hooks.lockOnCheck },
            { index, callId, result: text },
          ),
        }),
      });
    },
    async calls(taskId) {
      await c.guard(writes.settle(taskId));
      return callsOf(c.db, taskId);
    },
  };
}

/** A task held under `fence` at `now` (`lockRow`: the check locks its row against a claim committing meanwhile). */
interface HeldAt {
  taskId: string;
  fence: number | null;
  now: number;
  lockRow: boolean;
}

/** Records call `index` (started, or finished with `result`) while the task is held: one statement. */
function recordCall(on: Kdb, h: HeldAt, call: { index: number; callId: string; result?: string }) {
  const finished = call.result === undefined ? 0 : 1;
  return on
    .insertInto('task_calls')
    .columns(['task_id', 'idx', 'call_id', 'finished', 'result'])
    .expression(
      on
        .selectNoFrom((s) => [
          s.val(h.taskId).as('task_id'),
          s.cast<number>(s.val(call.index), 'integer').as('idx'),
          s.val(call.callId).as('call_id'),
          s.cast<number>(s.val(finished), 'integer').as('finished'),
          s.val(call.result ?? null).as('result'),
        ])
        .where((w) =>
          w.exists(
            w
              .selectFrom('tasks')
              .select('task_id')
              .where(held(h.taskId, h.fence, h.now))
              .$if(h.lockRow, (q) => q.forShare()),
          ),
        ),
    )
    .onConflict((oc) =>
      oc.columns(['task_id', 'idx']).doUpdateSet((eb) => ({
        call_id: eb.ref('excluded.call_id'),
        finished: eb.ref('excluded.finished'),
        result: eb.ref('excluded.result'),
      })),
    );
}

/** A checkpoint: the reply whose calls run next, the call records of the one before dropped. */
function checkpointWork(c: StoreContext, taskId: string, state: string, steps: number): FencedWork {
  return {
    one: (on, fence) => ({
      statement: on
        .updateTable('tasks')
        .set({ resume_state: state, steps })
        .where(held(taskId, fence, c.leases.now())),
      dropCalls: true,
    }),
  };
}
