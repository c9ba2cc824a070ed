import { held, parsed, type StoreContext } from './context.ts';
import type { Kdb } from './dialect.ts';
import type { CallRecord, TaskStore } from './interface.ts';

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
  /** Records call `index` (started, or finished with `result`) while the task is held under `fence`. */
  const record = async (
    on: Kdb,
    taskId: string,
    fence: number | null,
    call: { index: number; callId: string; result?: string },
  ) => {
    const finished = call.result === undefined ? 0 : 1;
    const result = call.result ?? null;
    const res = await on
      .insertInto('task_calls')
      .columns(['task_id', 'idx', 'call_id', 'finished', 'result'])
      .expression(
        on
          .selectNoFrom((s) => [
            s.val(taskId).as('task_id'),
            s.cast<number>(s.val(call.index), 'integer').as('idx'),
            s.val(call.callId).as('call_id'),
            s.cast<number>(s.val(finished), 'integer').as('finished'),
            s.val(result).as('result'),
          ])
          .where((w) =>
            w.exists(
              w
                .selectFrom('tasks')
                .select('task_id')
                .where(held(taskId, fence, leases.now()))
                .$if(c.hooks.lockOnCheck, (q) => q.forShare()),
            ),
          ),
      )
      .onConflict((oc) =>
        oc.columns(['task_id', 'idx']).doUpdateSet((eb) => ({
          call_id: eb.ref('excluded.call_id'),
          finished: eb.ref('excluded.finished'),
          result: eb.ref('excluded.result'),
        })),
      )
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0);
  };
  return {
    // Written behind, in the task's order: the call that starts next waits for it (callStarted), before it runs.
    async checkpoint(taskId, state, steps) {
      const text = JSON.stringify(state);
      writes.fencedBehind(taskId, async (on, fence) => {
        const res = await on
          .updateTable('tasks')
          .set({ resume_state: text, steps })
          .where(held(taskId, fence, leases.now()))
          .executeTakeFirst();
        const changed = Number(res.numUpdatedRows);
        if (changed) await on.deleteFrom('task_calls').where('task_id', '=', taskId).execute();
        return changed;
      });
    },
    async callStarted(taskId, index, callId) {
      await writes.fencedWrite(taskId, (on, fence) => record(on, taskId, fence, { index, callId }));
    },
    // Written behind, as the checkpoint (lost in a crash, the call only looks unfinished: the safe side).
    async callFinished(taskId, index, callId, result) {
      const text = JSON.stringify(result);
      writes.fencedBehind(taskId, (on, fence) => record(on, taskId, fence, { index, callId, result: text }));
    },
    async calls(taskId) {
      await c.guard(writes.settle(taskId));
      return callsOf(c.db, taskId);
    },
  };
}
