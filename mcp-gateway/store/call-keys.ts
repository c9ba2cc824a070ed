import { type Kysely, sql } from 'kysely';
import type { CallKeyQueries, CallKeyRow } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

export type { Begun, CallKeyQueries, CallKeyRow, CallStart } from './interface.ts';

// The record of keyed tool calls (exactly-once across gateway replicas, docs/task-loop.md): each idempotency
// key's start and outcome, and per task the highest fencing number seen. A key is recorded as started before
// its call runs, in the same short transaction that checks and raises its task's fence, so of two replicas
// given one key only one runs it (the second's insert waits for the first's commit, then finds it), and a call
// sent under a lease that has passed on is refused before it runs. Two replicas beginning calls of one task
// queue on the task's fence row (the upsert holds it until the commit).

/** Raises task `taskId`'s highest fence to `fence` unless higher already; the highest. */
async function raise(
  db: Kysely<GatewayDatabase>,
  taskId: string,
  fence: number,
  at: number,
): Promise<number> {
  const row = await db
    .insertInto('task_fences')
    .values({ task_id: taskId, fence, seen_at: at })
    .onConflict((oc) =>
      oc.column('task_id').doUpdateSet({
        // The higher of the two, said the same way to both databases (SQLite has no GREATEST).
        fence: sql`CASE WHEN excluded.fence > task_fences.fence THEN excluded.fence ELSE task_fences.fence END`,
        seen_at: (eb) => eb.ref('excluded.seen_at'),
      }),
    )
    .returning('fence')
    .executeTakeFirst();
  return Number(row?.fence ?? fence);
}

export function callKeyQueries(db: Kysely<GatewayDatabase>): CallKeyQueries {
  return {
    begin: (s) =>
      db.transaction().execute(async (trx) => {
        if (s.task_id !== null && s.fence !== null) {
          // A higher fence stays as it was: refusing needs no rollback.
          const highest = await raise(trx, s.task_id, s.fence, s.at);
          if (highest > s.fence) return { fenced: highest };
        }
        if (s.key === null) return { run: true as const };
        const inserted = await trx
          .insertInto('call_keys')
          .values({
            key: s.key,
            session_id: s.session_id,
            tool: s.tool,
            task_id: s.task_id,
            fence: s.fence,
            state: 'started',
            started_at: s.at,
          })
          .onConflict((oc) => oc.column('key').doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return { run: true as const };
        const row = await trx
          .selectFrom('call_keys')
          .select(['key', 'session_id', 'tool', 'state', 'outcome', 'started_at'])
          .where('key', '=', s.key)
          .executeTakeFirst();
        if (!row) throw new Error(`the call key ${s.key} was neither inserted nor found`);
        const existing: CallKeyRow = {
          ...row,
          state: row.state as CallKeyRow['state'],
          started_at: Number(row.started_at),
        };
        return { existing };
      }),
    async finish(key, outcome, at) {
      await db
        .updateTable('call_keys')
        .set({ state: 'done', outcome, finished_at: at })
        .where('key', '=', key)
        .where('state', '=', 'started')
        .execute();
    },
    async forget(key) {
      await db.deleteFrom('call_keys').where('key', '=', key).where('state', '=', 'started').execute();
    },
    announce: (taskId, fence, at) => raise(db, taskId, fence, at),
    async prune(before, limit) {
      const keys = await db
        .deleteFrom('call_keys')
        .where(
          'key',
          'in',
          db.selectFrom('call_keys').select('key').where('started_at', '<', before).limit(limit),
        )
        .executeTakeFirst();
      const gone = Number(keys.numDeletedRows);
      const fences = await db
        .deleteFrom('task_fences')
        .where(
          'task_id',
          'in',
          db
            .selectFrom('task_fences')
            .select('task_id')
            .where('seen_at', '<', before)
            .limit(Math.max(0, limit - gone)),
        )
        .executeTakeFirst();
      return gone + Number(fences.numDeletedRows);
    },
  };
}
