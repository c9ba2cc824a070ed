import type { SyncPostgres } from '../../lib/postgres-sync.ts';
import type { CallKeyQueries, CallKeyRow } from './call-keys.ts';

// Keyed calls on PostgreSQL, shared by every replica (store/call-keys.ts says what they are for). Two replicas
// beginning calls of one task queue on the task's fence row (the upsert locks it until the commit), and two
// given one key on the key (the second insert waits for the first to commit, then finds it).

/** The migration that adds the tables (store/postgres.ts runs it after the others). */
export const CALL_KEYS_MIGRATION = `CREATE TABLE call_keys (
     key TEXT PRIMARY KEY, session_id TEXT NOT NULL, tool TEXT NOT NULL, task_id TEXT, fence BIGINT,
     state TEXT NOT NULL, outcome TEXT, started_at BIGINT NOT NULL, finished_at BIGINT);
   CREATE INDEX call_keys_started ON call_keys (started_at);
   CREATE TABLE task_fences (task_id TEXT PRIMARY KEY, fence BIGINT NOT NULL, seen_at BIGINT NOT NULL);
   CREATE INDEX task_fences_seen ON task_fences (seen_at);`;

const RAISE = `INSERT INTO task_fences (task_id, fence, seen_at) VALUES ($1, $2, $3)
  ON CONFLICT (task_id) DO UPDATE SET fence = GREATEST(task_fences.fence, excluded.fence), seen_at = excluded.seen_at
  RETURNING fence`;

export function postgresCallKeyQueries(db: SyncPostgres): CallKeyQueries {
  const raise = (taskId: string, fence: number, at: number) =>
    Number(db.query<{ fence: string }>(RAISE, [taskId, fence, at])[0]?.fence ?? fence);
  return {
    begin: (s) =>
      db.transaction(() => {
        if (s.task_id !== null && s.fence !== null) {
          // GREATEST keeps a higher fence as it was: refusing needs no rollback.
          const highest = raise(s.task_id, s.fence, s.at);
          if (highest > s.fence) return { fenced: highest };
        }
        if (s.key === null) return { run: true as const };
        const inserted = db.run(
          `INSERT INTO call_keys (key, session_id, tool, task_id, fence, state, started_at)
           VALUES ($1, $2, $3, $4, $5, 'started', $6) ON CONFLICT (key) DO NOTHING`,
          [s.key, s.session_id, s.tool, s.task_id, s.fence, s.at],
        );
        if (inserted > 0) return { run: true as const };
        const [row] = db.query<CallKeyRow & { started_at: string }>(
          'SELECT key, session_id, tool, state, outcome, started_at FROM call_keys WHERE key = $1',
          [s.key],
        );
        if (!row) throw new Error(`the call key ${s.key} was neither inserted nor found`);
        return { existing: { ...row, started_at: Number(row.started_at) } };
      }),
    finish: (key, outcome, at) =>
      void db.run(
        "UPDATE call_keys SET state = 'done', outcome = $1, finished_at = $2 WHERE key = $3 AND state = 'started'",
        [outcome, at, key],
      ),
    forget: (key) => void db.run("DELETE FROM call_keys WHERE key = $1 AND state = 'started'", [key]),
    announce: raise,
    prune(before, limit) {
      const keys = db.run(
        'DELETE FROM call_keys WHERE key IN (SELECT key FROM call_keys WHERE started_at < $1 LIMIT $2)',
        [before, limit],
      );
      return (
        keys +
        db.run(
          'DELETE FROM task_fences WHERE task_id IN (SELECT task_id FROM task_fences WHERE seen_at < $1 LIMIT $2)',
          [before, Math.max(0, limit - keys)],
        )
      );
    },
  };
}
