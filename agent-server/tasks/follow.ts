import { StoreUnavailable } from '../../lib/db/reachability.ts';
import { type ExecuteTaskResponse, isLive } from '../contract.ts';
import type { TaskStore } from '../store/interface.ts';
import type { TaskListener } from './deps.ts';
import { resultOf } from './outcome.ts';

/** With notifications of ends, how many queue polls pass between reads for one missed. */
const MISSED_END_FACTOR = 5;

/** A task that goes on in another process (claimed or resumed there): its end, read from the store once there. */
export async function followElsewhere(
  store: TaskStore,
  pollMs: number,
  taskId: string,
  listeners: Set<TaskListener>,
): Promise<ExecuteTaskResponse> {
  // Read again when the other process records the task's end (a store shared by processes says so), or now and
  // then: every pollMs without that, and then only for a notification missed (its connection lost meanwhile).
  const every = store.embedded ? pollMs : pollMs * MISSED_END_FACTOR;
  let wake: () => void = () => {};
  let told = false;
  const stopHearing = store.onTaskEnd(taskId, () => {
    told = true;
    wake();
  });
  try {
    for (;;) {
      told = false;
      // The database unreachable: read again once it may be back (its end is recorded there, whenever).
      const task = await store.getTask(taskId).catch((err: unknown) => {
        if (err instanceof StoreUnavailable) return null;
        throw err;
      });
      if (task && !isLive(task.status)) {
        const result = resultOf(task);
        for (const l of listeners) l.end?.(result);
        return result;
      }
      if (told && task !== null) continue;
      await new Promise<void>((r) => {
        const timer = setTimeout(r, every);
        wake = () => {
          clearTimeout(timer);
          r();
        };
      });
    }
  } finally {
    stopHearing();
  }
}
