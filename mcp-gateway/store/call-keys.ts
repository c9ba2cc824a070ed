import type { Db } from '../../lib/sqlite.ts';

// The record of keyed tool calls (exactly-once across gateway replicas, docs/task-loop.md): each idempotency
// key's start and outcome, and per task the highest fencing number seen. A key is recorded as started before
// its call runs, in the same transaction that checks and raises its task's fence, so of two replicas given
// one key only one runs it, and a call sent under a lease that has passed on is refused before it runs.

export const CALL_KEYS_SCHEMA = `
CREATE TABLE IF NOT EXISTS call_keys (
  key TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  tool TEXT NOT NULL,
  task_id TEXT,
  fence INTEGER,
  state TEXT NOT NULL,
  outcome TEXT,
  started_at INTEGER NOT NULL,
  finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS call_keys_started ON call_keys (started_at);
CREATE TABLE IF NOT EXISTS task_fences (task_id TEXT PRIMARY KEY, fence INTEGER NOT NULL, seen_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS task_fences_seen ON task_fences (seen_at);
`;

/** A key as recorded: `started` until its call ends, then `done` with the outcome (JSON) it answered. */
export interface CallKeyRow {
  key: string;
  session_id: string;
  tool: string;
  state: 'started' | 'done';
  outcome: string | null;
  started_at: number;
}

/** A keyed call about to run: its key (none: only the fence is checked), session, tool and lease. */
export interface CallStart {
  key: string | null;
  session_id: string;
  tool: string;
  task_id: string | null;
  fence: number | null;
  at: number;
}

/** What beginning a call found: it may run, it is fenced off, or its key was used before. */
export type Begun = { run: true } | { fenced: number } | { existing: CallKeyRow };

/** The statements keyed calls need: SQLite's below, PostgreSQL's in store/postgres-call-keys.ts. */
export interface CallKeyQueries {
  /**
   * One transaction: refuses a fence lower than the task's highest (nothing recorded), raises the highest to
   * this one, and records the key as started unless it exists (then returns it as it stands).
   */
  begin(start: CallStart): Begun;
  /** Records the outcome (JSON) of a started key. */
  finish(key: string, outcome: string, at: number): void;
  /** Drops a started key whose call was refused before it ran (an approval to ask for, a rate limit). */
  forget(key: string): void;
  /** Raises the task's highest fence to `fence` unless higher already; returns the highest. */
  announce(taskId: string, fence: number, at: number): number;
  /** Deletes at most `limit` keys started, and fences last seen, before `before` (ms). */
  prune(before: number, limit: number): number;
}

/** The SQLite statements of keyed calls (tables created if needed). */
export function sqliteCallKeyQueries(db: Db): CallKeyQueries {
  db.exec(CALL_KEYS_SCHEMA);
  const q = {
    fence: db.prepare<[string], { fence: number }>('SELECT fence FROM task_fences WHERE task_id = ?'),
    raise: db.prepare(
      `INSERT INTO task_fences (task_id, fence, seen_at) VALUES (?, ?, ?)
       ON CONFLICT(task_id) DO UPDATE SET fence = max(fence, excluded.fence), seen_at = excluded.seen_at`,
    ),
    get: db.prepare<[string], CallKeyRow>(
      'SELECT key, session_id, tool, state, outcome, started_at FROM call_keys WHERE key = ?',
    ),
    insert: db.prepare(
      `INSERT INTO call_keys (key, session_id, tool, task_id, fence, state, started_at)
       VALUES (@key, @session_id, @tool, @task_id, @fence, 'started', @at)`,
    ),
    finish: db.prepare(
      "UPDATE call_keys SET state = 'done', outcome = ?, finished_at = ? WHERE key = ? AND state = 'started'",
    ),
    forget: db.prepare("DELETE FROM call_keys WHERE key = ? AND state = 'started'"),
    pruneKeys: db.prepare(
      'DELETE FROM call_keys WHERE key IN (SELECT key FROM call_keys WHERE started_at < ? LIMIT ?)',
    ),
    pruneFences: db.prepare(
      'DELETE FROM task_fences WHERE task_id IN (SELECT task_id FROM task_fences WHERE seen_at < ? LIMIT ?)',
    ),
  };
  const begin = db.transaction((s: CallStart): Begun => {
    if (s.task_id !== null && s.fence !== null) {
      const highest = q.fence.get(s.task_id)?.fence;
      if (highest !== undefined && highest > s.fence) return { fenced: highest };
      q.raise.run(s.task_id, s.fence, s.at);
    }
    if (s.key === null) return { run: true };
    const existing = q.get.get(s.key);
    if (existing) return { existing };
    q.insert.run(s);
    return { run: true };
  });
  return {
    begin: (s) => begin.immediate(s),
    finish: (key, outcome, at) => void q.finish.run(outcome, at, key),
    forget: (key) => void q.forget.run(key),
    announce: (taskId, fence, at) => {
      q.raise.run(taskId, fence, at);
      return q.fence.get(taskId)?.fence ?? fence;
    },
    prune: (before, limit) => {
      const keys = q.pruneKeys.run(before, limit).changes;
      return keys + q.pruneFences.run(before, Math.max(0, limit - keys)).changes;
    },
  };
}
