import type { Db } from '../../lib/db/sqlite.ts';

// The SQLite task store's schema, as numbered steps applied once each in order (lib/db/sqlite.ts migrate). A
// released step is never edited: a change is the next one, with a fixture of the database before it
// (tests/fixtures/agent-store/).

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tasks (
  task_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  goal TEXT NOT NULL,
  status TEXT NOT NULL,
  final_answer TEXT,
  error TEXT,
  steps INTEGER NOT NULL DEFAULT 0,
  usage TEXT NOT NULL DEFAULT '{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}',
  toolsets_used TEXT NOT NULL DEFAULT '[]',
  tokens TEXT,
  created_at TEXT NOT NULL,
  finished_at TEXT
);
CREATE INDEX IF NOT EXISTS tasks_created ON tasks (created_at);
CREATE TABLE IF NOT EXISTS task_events (
  task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  at TEXT NOT NULL,
  duration_ms REAL,
  data TEXT NOT NULL,
  PRIMARY KEY (task_id, seq)
);
`;

/**
 * The schema's versions (lib/db/sqlite.ts migrateSqlite). A database made before migrations were recorded has
 * the tables and perhaps some of the columns: step 1 only creates what is missing, step 2 adds each column
 * it lacks.
 */
export const MIGRATIONS = [
  SCHEMA,
  (db: Db) => {
    const have = new Set(
      db
        .prepare<[], { name: string }>("SELECT name FROM pragma_table_info('tasks')")
        .all()
        .map((c) => c.name),
    );
    // The token totals; what a paused task waits for and the loop state it resumes from (also after a restart).
    for (const column of ['tokens', 'pending_approval', 'resume_state'])
      if (!have.has(column)) db.exec(`ALTER TABLE tasks ADD COLUMN ${column} TEXT`);
  },
  // A queued task's request (steps, duration, exposure), to start it later, also after a restart.
  'ALTER TABLE tasks ADD COLUMN request TEXT',
  // Leases (who runs a task, until when, under which fence), a human's decision recorded here, and the
  // tool calls of a task's checkpointed reply.
  `ALTER TABLE tasks ADD COLUMN lease_owner TEXT;
   ALTER TABLE tasks ADD COLUMN lease_until INTEGER;
   ALTER TABLE tasks ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE tasks ADD COLUMN decision TEXT;
   CREATE INDEX IF NOT EXISTS tasks_status ON tasks (status);
   CREATE TABLE task_calls (
     task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
     idx INTEGER NOT NULL,
     call_id TEXT NOT NULL,
     finished INTEGER NOT NULL,
     result TEXT,
     PRIMARY KEY (task_id, idx)
   );`,
  // The console: its logins and one-time login codes; listings by status, newest first.
  `CREATE TABLE console_logins (
     id_hash TEXT PRIMARY KEY,
     kind TEXT NOT NULL,
     role TEXT NOT NULL,
     sealed TEXT NOT NULL,
     expires_at INTEGER NOT NULL
   );
   CREATE INDEX tasks_status_created ON tasks (status, created_at);`,
];
