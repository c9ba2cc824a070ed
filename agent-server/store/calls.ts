import { checkpointMethod } from './checkpoints.ts';
import { held, parsed, type StoreContext } from './context.ts';
import type { Kdb } from './dialect.ts';
import { type HeldArgs, heldWrite } from './held-write.ts';
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
  const lockRow = c.hooks.lockOnCheck;
  const record = heldWrite<CallArgs>(c.db, c.hooks, ['idx', 'call', 'finished', 'result'], (db, a) =>
    recordCall(db, a, lockRow),
  );
  const call = (task: string, idx: number, id: string, result: string | null): FencedWork => ({
    one: (fence) => ({
      statement: record({
        task,
        fence,
        now: leases.now(),
        idx,
        call: id,
        finished: result === null ? 0 : 1,
        result,
      }),
    }),
  });
  return {
    // Written behind, in the task's order: the call that starts next waits for it (callStarted), before it runs.
    // The reply it holds replaces the call records of the one before (store/checkpoints.ts).
    checkpoint: checkpointMethod(c),
    async callStarted(taskId, index, callId) {
      await writes.fencedWrite(taskId, call(taskId, index, callId, null));
    },
    // Written behind, as the checkpoint (lost in a crash, the call only looks unfinished: the safe side).
    async callFinished(taskId, index, callId, result) {
      writes.fencedBehind(taskId, call(taskId, index, callId, JSON.stringify(result)));
    },
    async calls(taskId) {
      await c.guard(writes.settle(taskId));
      return callsOf(c.db, taskId);
    },
  };
}

/** A call's record: its position in the reply, its id, and its result once finished. */
interface CallArgs extends Record<string, unknown> {
  idx: number;
  call: string;
  finished: number;
  result: string | null;
}

/** Records a call (started, or finished with its result) while the task is held: one statement. */
function recordCall(on: Kdb, a: CallArgs & HeldArgs, lockRow: boolean) {
  return on
    .insertInto('task_calls')
    .columns(['task_id', 'idx', 'call_id', 'finished', 'result'])
    .expression(
      on
        .selectNoFrom((s) => [
          s.val(a.task).as('task_id'),
          s.cast<number>(s.val(a.idx), 'integer').as('idx'),
          s.val(a.call).as('call_id'),
          s.cast<number>(s.val(a.finished), 'integer').as('finished'),
          s.val(a.result).as('result'),
        ])
        .where((w) =>
          w.exists(
            w
              .selectFrom('tasks')
              .select('task_id')
              .where(held(a.task, a.fence, a.now))
              .$if(lockRow, (q) => q.forShare()),
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
