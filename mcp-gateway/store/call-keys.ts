import { type Kysely, sql } from 'kysely';
import { statement } from '../../lib/db/kysely.ts';
import type { CallKeyQueries, CallKeyRow } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

export type { Begun, CallKeyQueries, CallKeyRow, CallStart } from './interface.ts';

// The record of keyed tool calls (exactly-once across gateway replicas, docs/task-loop.md): each idempotency
// key's start and outcome, and per task the highest fencing number seen. A key is recorded as started before
// its call runs, in the same short transaction that checks and raises its task's fence, so of two replicas
// given one key only one runs it (the second's insert waits for the first's commit, then finds it), and a call
// sent under a lease that has passed on is refused before it runs. Two replicas beginning calls of one task
// queue on the task's fence row (the upsert holds it until the commit).

type Db = Kysely<GatewayDatabase>;

/** The statements of keyed calls, each compiled once: a keyed call runs them on every call. */
function keyStatements(db: Db) {
  return {
    // The higher of the two, said the same way to both databases (SQLite has no GREATEST).
    raise: statement(db, ['task', 'fence', 'at'], (k, a: { task: string; fence: number; at: number }) =>
      k
        .insertInto('task_fences')
        .values({ task_id: a.task, fence: a.fence, seen_at: a.at })
        .onConflict((oc) =>
          oc.column('task_id').doUpdateSet({
            fence: sql`CASE WHEN excluded.fence > task_fences.fence THEN excluded.fence ELSE task_fences.fence END`,
            seen_at: (eb) => eb.ref('excluded.seen_at'),
          }),
        )
        .returning('fence'),
    ),
    insert: statement(
      db,
      ['key', 'session', 'tool', 'task', 'fence', 'at'],
      (
        k,
        a: {
          key: string;
          session: string;
          tool: string;
          task: string | null;
          fence: number | null;
          at: number;
        },
      ) =>
        k
          .insertInto('call_keys')
          .values({
            key: a.key,
            session_id: a.session,
            tool: a.tool,
            task_id: a.task,
            fence: a.fence,
            state: 'started',
            started_at: a.at,
          })
          .onConflict((oc) => oc.column('key').doNothing()),
    ),
    get: statement(db, ['key'], (k, a: { key: string }) =>
      k
        .selectFrom('call_keys')
        .select(['key', 'session_id', 'tool', 'state', 'outcome', 'started_at'])
        .where('key', '=', a.key),
    ),
    finish: statement(db, ['key', 'outcome', 'at'], (k, a: { key: string; outcome: string; at: number }) =>
      k
        .updateTable('call_keys')
        .set({ state: 'done', outcome: a.outcome, finished_at: a.at })
        .where('key', '=', a.key)
        .where('state', '=', 'started'),
    ),
    forget: statement(db, ['key'], (k, a: { key: string }) =>
      k.deleteFrom('call_keys').where('key', '=', a.key).where('state', '=', 'started'),
    ),
  };
}

export function callKeyQueries(db: Db): CallKeyQueries {
  const q = keyStatements(db);
  /** Raises task `taskId`'s highest fence to `fence` unless higher already; the highest. */
  const raise = async (on: Db, task: string, fence: number, at: number) =>
    Number((await q.raise(on, { task, fence, at })).rows[0]?.fence ?? fence);
  return {
    begin: (s) =>
      db.transaction().execute(async (trx) => {
        if (s.task_id !== null && s.fence !== null) {
          // A higher fence stays as it was: refusing needs no rollback.
          const highest = await raise(trx, s.task_id, s.fence, s.at);
          if (highest > s.fence) return { fenced: highest };
        }
        if (s.key === null) return { run: true as const };
        const inserted = await q.insert(trx, {
          key: s.key,
          session: s.session_id,
          tool: s.tool,
          task: s.task_id,
          fence: s.fence,
          at: s.at,
        });
        if (Number(inserted.numAffectedRows ?? 0) > 0) return { run: true as const };
        const [row] = (await q.get(trx, { key: s.key })).rows;
        if (!row) throw new Error(`the call key ${s.key} was neither inserted nor found`);
        const existing: CallKeyRow = {
          ...row,
          state: row.state as CallKeyRow['state'],
          started_at: Number(row.started_at),
        };
        return { existing };
      }),
    async finish(key, outcome, at) {
      await q.finish(db, { key, outcome, at });
    },
    async forget(key) {
      await q.forget(db, { key });
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
