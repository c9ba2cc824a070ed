import { type Expression, type RawBuilder, type SqlBool, sql } from 'kysely';
import { compiledOnce } from '../../lib/db/kysely.ts';
import { held, type StoreContext } from './context.ts';
import type { DialectHooks, Kdb } from './dialect.ts';
import { heldWrite } from './held-write.ts';
import type { CheckpointPart, TaskStore } from './interface.ts';

// A running task's checkpoint, appended: `tasks.resume_state` holds its small state (counts, usage, the reply
// being answered), rewritten each time, and `task_checkpoint_parts` its conversation, each part the messages one
// checkpoint added from position `start` on. A checkpoint whose conversation does not go on from the last one's
// (the first of a worker, or after anything rewrote an earlier message) is a base: one part from 0, the others
// dropped. So a task of n steps writes its conversation about once, not n times over. Both are one fenced write
// (a worker that lost the lease writes neither), and an append is refused unless it starts where the parts end
// (`tasks.checkpoint_messages`): the parts of a checkpoint always tile its conversation.

/** The checkpoint's statement and the part that commits with it. */
export function checkpointMethod(c: StoreContext): TaskStore['checkpoint'] {
  const { leases, writes, hooks } = c;
  const header = heldWrite<{ state: string; steps: number; count: number | null; start: number }>(
    c.db,
    hooks,
    ['state', 'steps', 'count', 'start'],
    (db, a) =>
      db
        .updateTable('tasks')
        .set({ resume_state: a.state, steps: a.steps, checkpoint_messages: a.count })
        .where(held(a.task, a.fence, a.now))
        // A base, a whole checkpoint of old (start 0), or an append where the parts end.
        .where((eb) =>
          eb.or([sql<SqlBool>`CAST(${a.start} AS integer) = 0`, eb('checkpoint_messages', '=', a.start)]),
        ),
  );
  const part = partInsert(c.db, hooks);
  return async (taskId, state, steps, added?: CheckpointPart) => {
    // Serialised now: the loop goes on changing its state while the write waits its turn.
    const text = JSON.stringify(state);
    const start = added?.start ?? 0;
    const data = added && JSON.stringify(added.messages);
    writes.fencedBehind(taskId, {
      one: (fence) => ({
        statement: header({
          task: taskId,
          fence,
          now: leases.now(),
          state: text,
          steps,
          count: added ? start + added.messages.length : null,
          start,
        }),
        dropCalls: true,
        // A base drops the parts after it; a checkpoint of old, every part.
        ...(start === 0 ? { dropParts: added ? ('rest' as const) : ('all' as const) } : {}),
        ...(data !== undefined ? { also: part({ task: taskId, start, data }) } : {}),
      }),
    });
  };
}

/** A part's INSERT (compiled once), run only when the checkpoint's statement changed the task's row. */
function partInsert(db: Kdb, hooks: DialectHooks) {
  return compiledOnce<unknown, { task: string; start: number; data: string }, unknown>(
    db as never,
    ['task', 'start', 'data'],
    (d, a) =>
      (d as Kdb)
        .insertInto('task_checkpoint_parts')
        .columns(['task_id', 'start', 'data'])
        .expression(
          (d as Kdb)
            .selectNoFrom((s) => [
              s.val(a.task).as('task_id'),
              s.cast<number>(s.val(a.start), 'integer').as('start'),
              s.val(a.data).as('data'),
            ])
            // PostgreSQL: in the write's statement, after its CTE `w` (dialect.ts oneWriteSql).
            .where(hooks.oneWrite ? sql<SqlBool>`EXISTS (SELECT 1 FROM w)` : sql<SqlBool>`1 = 1`),
        )
        .onConflict((oc) =>
          oc.columns(['task_id', 'start']).doUpdateSet((eb) => ({ data: eb.ref('excluded.data') })),
        ),
  );
}

/** A task's checkpoint parts as one JSON array of `{start, data}` (in a claim's RETURNING). */
export function partsOf(dialect: DialectHooks['name'], taskId: Expression<string>): RawBuilder<unknown> {
  return dialect === 'postgres'
    ? sql`(SELECT json_agg(json_build_object('start', p.start, 'data', p.data::json) ORDER BY p.start)
        FROM task_checkpoint_parts p WHERE p.task_id = ${taskId})`
    : sql`(SELECT json_group_array(json_object('start', p.start, 'data', json(p.data)))
        FROM task_checkpoint_parts p WHERE p.task_id = ${taskId})`;
}

/** A part as a claim reads it. */
interface StoredPart {
  start: number;
  data: unknown[];
}

/**
 * The checkpoint a claim goes on from: its stored state, with (when its conversation is in parts, `count`
 * messages of them) the messages put back together. Parts that do not tile it (a database edited by hand) give
 * no state and say why (the task then ends failed, saying so), never a shorter conversation.
 */
export function rebuiltState(
  taskId: string,
  state: unknown,
  count: unknown,
  parts: unknown,
): { state: unknown; unreadable?: string } {
  if (count === null || count === undefined || state === null || typeof state !== 'object') return { state };
  const all = (typeof parts === 'string' ? JSON.parse(parts) : (parts ?? [])) as StoredPart[];
  const messages: unknown[] = [];
  for (const p of [...all].sort((a, b) => Number(a.start) - Number(b.start))) {
    if (messages.length >= Number(count)) break;
    if (Number(p.start) !== messages.length) break;
    messages.push(...p.data);
  }
  if (messages.length !== Number(count)) {
    const unreadable =
      `the checkpoint of task ${taskId} holds ${count} messages but its stored parts tile ${messages.length}: ` +
      'its conversation cannot be rebuilt';
    return { state: null, unreadable };
  }
  return { state: { ...state, messages } };
}
