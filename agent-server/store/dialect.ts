import {
  type Compilable,
  type CompiledQuery,
  type Expression,
  type Kysely,
  type OperationNodeSource,
  type RawBuilder,
  type SqlBool,
  sql,
} from 'kysely';
import { type DialectName, fixedChunks, type StoreDb } from '../../lib/db/kysely.ts';
import { listenPostgres, type Pool, reachabilityOf } from '../../lib/db/postgres.ts';
import { type Reachability, StoreUnavailable } from '../../lib/db/reachability.ts';
import type { EventType } from '../contract.ts';
import type { AgentDatabase } from './schema.ts';

// What differs between the two databases, behind small named hooks; every other statement of the store is
// written once. PostgreSQL: a batch of events in one statement (unnest) whose fence check locks the task's row
// and whose notification wakes followers in other processes, LISTEN/NOTIFY, statements retried while the server
// is unreachable. SQLite: one process and one writer, so nothing to tell anyone; events go in a few multi-row
// statements of a handful of fixed sizes (each size's SQL prepared once), after one fence check per task.

export type Kdb = Kysely<AgentDatabase>;

/** An event row to write, and the fence its task is held under here (null: written unfenced). */
export type EventRow = AgentDatabase['task_events'] & { fence: number | null };

/** The channels other processes hear on: tasks with new events (their ids), the queue, and ends. */
export const EVENTS_CHANNEL = 'toolshift_task_events';
export const QUEUE_CHANNEL = 'toolshift_task_queue';
export const END_CHANNEL = 'toolshift_task_ends';
/** Under PostgreSQL's 8,000-byte notification payload. */
export const MAX_PAYLOAD = 7800;

/** SQLSTATEs of a statement rolled back for others running beside it (deadlock, serialization failure). */
const TRANSIENT = new Set(['40P01', '40001']);

/** One write of a held task: a statement refused unless the task is held, and what goes with it when it changes the row. */
export interface OneWrite {
  /** Compiled (held-write.ts), with RETURNING 1 where PostgreSQL's oneWrite reads the rows it changed. */
  statement: CompiledQuery;
  /** The task's call records are dropped (a checkpoint's new reply, an end). */
  dropCalls?: boolean;
  /** The task's checkpoint parts are dropped: all of them (a pause, an end), or all but the first (a new base). */
  dropParts?: 'all' | 'rest';
  /** The other processes hear on this channel (with the task's id) that it changed. */
  told?: string;
  /** An INSERT that commits with it, run only when it changed the row (a webhook POST, store/webhooks.ts). */
  also?: CompiledQuery;
}

export interface DialectHooks {
  name: DialectName;
  /** One process uses the database (SQLite's file): nothing to hear, no one to wake. */
  embedded: boolean;
  /**
   * Inserts event rows whose task is still held under their fence (or that are unfenced), and tells the other
   * processes whose tasks have new events; the rows written, by task. On a `retry` (the first try may have
   * committed before its connection was lost) rows already there are skipped.
   */
  insertEvents(db: Kdb, rows: readonly EventRow[], now: number, retry: boolean): Promise<Map<string, number>>;
  /**
   * PostgreSQL: one write of a held task in one statement (one round trip where a transaction would take four or
   * more): the write, then, only if it changed a row, the task's pending event rows, its call records dropped and
   * the notification; the rows it changed. None on SQLite (in process, a transaction costs nothing).
   */
  oneWrite?(
    db: Kdb,
    taskId: string,
    write: OneWrite,
    rows: readonly EventRow[],
    retry: boolean,
  ): Promise<number>;
  /** Extends the leases (task, fence) still this worker's to `until`; the ids extended. */
  renew(db: Kdb, held: readonly [string, number][], until: number): Promise<string[]>;
  /** A condition on `tasks`: the call its pending approval is for is `callId`. */
  pendingCallIs(callId: string): RawBuilder<SqlBool>;
  /** A condition on `tasks`: the goal holds `pattern` (a LIKE pattern, `\` escaping), ASCII case-insensitive. */
  goalLike(pattern: string): RawBuilder<SqlBool>;
  /** Whether a claim skips the rows other workers are claiming (FOR UPDATE SKIP LOCKED). */
  skipLocked: boolean;
  /** The call records of task `taskId` as one JSON array (in a claim's RETURNING). */
  callsOf(taskId: Expression<string>): RawBuilder<unknown>;
  /** Runs a claim's UPDATE … RETURNING and, in the same statement, tells the other processes which tasks went. */
  announceClaims(
    db: Kdb,
    update: Compilable<unknown> & OperationNodeSource,
    holder: string,
  ): Promise<unknown[]>;
  /** Whether a fenced write's check locks the task's row against a claim committing meanwhile (FOR SHARE). */
  lockOnCheck: boolean;
  /** Tells the other processes on `channel`, with the statement's transaction when `db` is one. */
  notify(db: Kdb, channel: string, payload: string): Promise<void>;
  /** Whether `err` is worth trying again (the server unreachable, a deadlock): never on SQLite. */
  transient(err: unknown): boolean;
  /** Whether the server was reached (PostgreSQL); none on SQLite. */
  reach?: Reachability;
  /** Listens on `channels` (PostgreSQL); returns the stop. */
  listen?(channels: string[], onNotify: (channel: string, payload: string) => void): () => Promise<void>;
}

/** Rows written, by task. */
function countByTask(taskIds: readonly string[]): Map<string, number> {
  const written = new Map<string, number>();
  for (const id of taskIds) written.set(id, (written.get(id) ?? 0) + 1);
  return written;
}

/** The most rows one INSERT carries. */
const MAX_ROWS_PER_INSERT = 1000;

/**
 * PostgreSQL: event rows in one statement, each refused unless its task is held under its fence (the check
 * locks the task's row against a claim committing meanwhile); one notification for the batch names its tasks
 * (or `*` for more than a payload holds). One array per column: seven parameters whatever the size.
 */
async function insertChunk(db: Kdb, rows: readonly EventRow[], now: number, retry: boolean) {
  const col = <K extends keyof EventRow>(k: K) => rows.map((r) => r[k]);
  const { rows: written } = await sql<{ task_id: string; n: string }>`WITH ins AS (
      INSERT INTO task_events (task_id, seq, type, at, duration_ms, data)
      SELECT v.task_id, v.seq, v.type, v.at, v.duration_ms, v.data
      FROM unnest(${col('task_id')}::text[], ${col('seq')}::int[], ${col('type')}::text[], ${col('at')}::text[],
        ${col('duration_ms')}::float8[], ${col('data')}::text[], ${col('fence')}::bigint[])
        AS v(task_id, seq, type, at, duration_ms, data, fence)
      WHERE v.fence IS NULL OR EXISTS (SELECT 1 FROM tasks t
        WHERE t.task_id = v.task_id AND t.fence = v.fence AND t.lease_until > ${now}::bigint FOR SHARE)
      ${retry ? sql`ON CONFLICT (task_id, seq) DO NOTHING` : sql``}
      RETURNING task_id),
    written AS (SELECT task_id, count(*) AS n FROM ins GROUP BY task_id),
    ids AS (SELECT string_agg(task_id, ',') AS list FROM written),
    sent AS (SELECT pg_notify(${EVENTS_CHANNEL}, CASE WHEN length(list) <= ${MAX_PAYLOAD} THEN list ELSE '*' END)
      FROM ids WHERE list IS NOT NULL)
    SELECT written.task_id, written.n FROM written LEFT JOIN sent ON true`.execute(db);
  return written.map((r): [string, number] => [r.task_id, Number(r.n)]);
}

/** The events CTE's parameters (one array per column) and the task's id come first: the write's move up. */
const WRITE_PARAMS = 7;

/**
 * PostgreSQL: the write as CTE `w` (it checks the fence and locks the row), and after it, on what it returned,
 * the events (their followers told once: payloads repeated in a transaction are sent once), the dropped calls
 * and the notification; data-modifying CTEs run to completion whether read or not, and read `w` as it ended.
 */
function oneWriteSql(write: OneWrite, retry: boolean): string {
  const moved = write.statement.sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + WRITE_PARAMS}`);
  // Always all of them (PostgreSQL wants a type for every parameter): with no events, empty arrays.
  const parts = [
    `w AS (${moved})`,
    `ev AS (INSERT INTO task_events (task_id, seq, type, at, duration_ms, data)
      SELECT v.task_id, v.seq, v.type, v.at, v.duration_ms, v.data
      FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::float8[], $6::text[])
        AS v(task_id, seq, type, at, duration_ms, data)
      WHERE EXISTS (SELECT 1 FROM w) ${retry ? 'ON CONFLICT (task_id, seq) DO NOTHING' : ''}
      RETURNING pg_notify('${EVENTS_CHANNEL}', task_id))`,
  ];
  if (write.dropCalls)
    parts.push('dropped AS (DELETE FROM task_calls WHERE task_id = $7 AND EXISTS (SELECT 1 FROM w))');
  if (write.dropParts)
    parts.push(`parts_dropped AS (DELETE FROM task_checkpoint_parts WHERE task_id = $7
      ${write.dropParts === 'rest' ? 'AND start > 0' : ''} AND EXISTS (SELECT 1 FROM w))`);
  // Its parameters after the write's (it reads `w` itself: store/webhooks.ts, store/checkpoints.ts).
  const after = WRITE_PARAMS + write.statement.parameters.length;
  if (write.also)
    parts.push(`also AS (${write.also.sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + after}`)})`);
  const told = write.told
    ? `, (SELECT count(*) FROM (SELECT pg_notify('${write.told}', $7) FROM w) n) AS told`
    : '';
  return `WITH ${parts.join(',\n')} SELECT $7::text AS task_id, (SELECT count(*) FROM w) AS changed${told}`;
}

export function postgresHooks(pool: Pool): DialectHooks {
  const reach = reachabilityOf(pool);
  return {
    name: 'postgres',
    embedded: false,
    async insertEvents(db, rows, now, retry) {
      const written = new Map<string, number>();
      for (let i = 0; i < rows.length; i += MAX_ROWS_PER_INSERT) {
        const chunk = rows.slice(i, i + MAX_ROWS_PER_INSERT);
        for (const [id, n] of await insertChunk(db, chunk, now, retry))
          written.set(id, (written.get(id) ?? 0) + n);
      }
      return written;
    },
    async oneWrite(db, taskId, write, rows, retry) {
      const col = <K extends keyof EventRow>(k: K) => rows.map((r) => r[k]);
      const events = [col('task_id'), col('seq'), col('type'), col('at'), col('duration_ms'), col('data')];
      const { rows: out } = await db.executeQuery<{ changed: string }>({
        ...write.statement,
        sql: oneWriteSql(write, retry),
        parameters: [...events, taskId, ...write.statement.parameters, ...(write.also?.parameters ?? [])],
      });
      return Number(out[0]?.changed ?? 0);
    },
    // Renewed while its fence is the task's, also once it lapsed (the database unreachable for longer than a
    // lease): until another worker claims the task (a new fence) it is still this worker's alone. One this
    // worker just ended or paused (its fence unchanged, its lease about to be let go) is not lost either.
    async renew(db, held, until) {
      const { rows } = await sql<{ task_id: string }>`UPDATE tasks t
        SET lease_until = CASE WHEN t.status = 'running' THEN ${until}::bigint ELSE t.lease_until END
        FROM unnest(${held.map(([t]) => t)}::text[], ${held.map(([, f]) => f)}::bigint[]) AS h(task_id, fence)
        WHERE t.task_id = h.task_id AND t.fence = h.fence RETURNING t.task_id`.execute(db);
      return rows.map((r) => r.task_id);
    },
    skipLocked: true,
    callsOf: (taskId) => sql`(SELECT json_agg(json_build_object('idx', c.idx, 'call_id', c.call_id,
      'finished', c.finished, 'result', c.result) ORDER BY c.idx) FROM task_calls c WHERE c.task_id = ${taskId})`,
    // The claimed ids (or `*`, more than a payload holds) and who claimed them, sent when the claim commits.
    async announceClaims(db, update, holder) {
      const { rows } = await sql`WITH claimed AS (${update}),
        ids AS (SELECT string_agg(task_id, ',' ORDER BY created_at, n) AS list FROM claimed),
        sent AS (SELECT pg_notify(${QUEUE_CHANNEL}, 'claimed' || chr(9) || ${holder}::text || chr(9) ||
          CASE WHEN length(list) <= ${MAX_PAYLOAD} THEN list ELSE '*' END) FROM ids WHERE list IS NOT NULL)
        SELECT claimed.* FROM claimed LEFT JOIN sent ON true`.execute(db);
      return rows;
    },
    pendingCallIs: (callId) => sql<SqlBool>`(pending_approval::json ->> 'call_id') = ${callId}`,
    goalLike: (pattern) => sql<SqlBool>`goal ILIKE ${pattern}`,
    lockOnCheck: true,
    async notify(db, channel, payload) {
      await sql`SELECT pg_notify(${channel}, ${payload})`.execute(db);
    },
    transient: (err) =>
      err instanceof StoreUnavailable || TRANSIENT.has((err as { code?: string }).code ?? ''),
    reach,
    listen: (channels, onNotify) => listenPostgres(pool, channels, onNotify),
  };
}

export function sqliteHooks(db: Kdb, sqlite: NonNullable<StoreDb<AgentDatabase>['sqlite']>): DialectHooks {
  // Held under its fence, its lease not lapsed: asked once per task and batch.
  const held = db
    .selectFrom('tasks')
    .select('task_id')
    .where('task_id', '=', '')
    .where('fence', '=', 0)
    .where('lease_until', '>', 0)
    .compile().sql;
  /** The multi-row INSERT of each chunk size, compiled once. */
  const inserts = new Map<number, string>();
  const insertOf = (size: number) => {
    let text = inserts.get(size);
    if (!text) {
      const row = { task_id: '', seq: 0, type: 'model_call' as EventType, at: '', duration_ms: 0, data: '' };
      text = db.insertInto('task_events').values(Array(size).fill(row)).compile().sql;
      inserts.set(size, text);
    }
    return text;
  };
  // The batch's few statements run in one turn, on the handle's cached statements: a step's rows cost little
  // more than raw inserts of them (bench/event-log.ts, figure 10).
  const write = (rows: readonly EventRow[], now: number) => {
    const refused = new Set<string>();
    const checked = new Set<string>();
    for (const r of rows) {
      if (r.fence === null || checked.has(r.task_id)) continue;
      checked.add(r.task_id);
      if (sqlite.prepare(held).get(r.task_id, r.fence, now) === undefined) refused.add(r.task_id);
    }
    const kept = refused.size === 0 ? rows : rows.filter((r) => !refused.has(r.task_id));
    for (const chunk of fixedChunks(kept)) {
      const params = chunk.flatMap((r) => [r.task_id, r.seq, r.type, r.at, r.duration_ms, r.data]);
      sqlite.prepare(insertOf(chunk.length)).run(params);
    }
    return countByTask(kept.map((r) => r.task_id));
  };
  const inTransaction = sqlite.handle.transaction(write);
  return {
    name: 'sqlite',
    embedded: true,
    // Inside the caller's transaction (it holds the connection), or in one of their own while holding it.
    insertEvents: async (on, rows, now) =>
      rows.length === 0
        ? new Map()
        : on.isTransaction
          ? write(rows, now)
          : sqlite.inTurn(() => inTransaction(rows, now)),
    async renew(on, leases, until) {
      return on.transaction().execute(async (trx) => {
        const renewed: string[] = [];
        for (const [task, fence] of leases) {
          const res = await trx
            .updateTable('tasks')
            .set({ lease_until: sql`CASE WHEN status = 'running' THEN ${until} ELSE lease_until END` })
            .where('task_id', '=', task)
            .where('fence', '=', fence)
            .executeTakeFirst();
          if (Number(res.numUpdatedRows) > 0) renewed.push(task);
        }
        return renewed;
      });
    },
    // One writer at a time already: nothing to skip.
    skipLocked: false,
    callsOf: (taskId) => sql`(SELECT json_group_array(json_object('idx', c.idx, 'call_id', c.call_id,
      'finished', c.finished, 'result', c.result)) FROM task_calls c WHERE c.task_id = ${taskId})`,
    // No other process to tell.
    async announceClaims(on, update) {
      return (await on.executeQuery(update.compile())).rows;
    },
    pendingCallIs: (callId) => sql<SqlBool>`json_extract(pending_approval, '$.call_id') = ${callId}`,
    // SQLite's LIKE ignores the case of ASCII letters.
    goalLike: (pattern) => sql<SqlBool>`goal LIKE ${pattern} ESCAPE '\\'`,
    lockOnCheck: false,
    notify: async () => {},
    transient: () => false,
    // One process uses the file: no one to hear.
  };
}
