import { statement } from '../../lib/db/kysely.ts';
import type { TaskEvent } from '../contract.ts';
import type { StoreContext } from './context.ts';
import type { TaskStore } from './interface.ts';

// A task's events: numbered when appended, written behind (writes.ts), and read back in order.

export function eventMethods(c: StoreContext): Pick<TaskStore, 'appendEvent' | 'events'> {
  // Read on every step a follower streams: compiled once (lib/db/kysely.ts statement).
  const after = statement(c.db, ['task', 'after'], (k, a: { task: string; after: number }) =>
    k
      .selectFrom('task_events')
      .select(['seq', 'type', 'at', 'duration_ms', 'data'])
      .where('task_id', '=', a.task)
      .where('seq', '>', a.after)
      .orderBy('seq'),
  );
  return {
    appendEvent(taskId, type, durationMs, data): TaskEvent {
      const last = c.lastSeq.get(taskId);
      if (last === undefined) {
        throw new Error(
          `task ${taskId} was not created or claimed through this store: its events cannot be numbered`,
        );
      }
      const seq = last + 1;
      c.lastSeq.set(taskId, seq);
      const at = new Date().toISOString();
      const fence = c.leases.fence(taskId) ?? null;
      c.writes.append({
        task_id: taskId,
        seq,
        type,
        at,
        duration_ms: durationMs,
        data: JSON.stringify(data),
        fence,
      });
      // The emitter typed `data` by its `type` (Emit); stored rows are read back as what they were written as.
      return { seq, type, at, duration_ms: durationMs, data } as TaskEvent;
    },
    /** The task's events in order; with `after`, only those whose seq is greater (for resuming a stream). */
    async events(taskId, since = 0) {
      await c.guard(c.writes.settle(taskId));
      const { rows } = await after(c.db, { task: taskId, after: since });
      return rows.map((e) => ({ ...e, data: JSON.parse(e.data) }) as TaskEvent);
    },
  };
}
