// The PostgreSQL task store's schema, as numbered steps applied once each in order (lib/db/postgres.ts
// migrate; recorded in schema_migrations under `agent-server`). A released step is never edited: a change is
// the next one, with a fixture of the database before it (tests/fixtures/agent-store/).

export const MIGRATIONS = [
  `CREATE TABLE tasks (
     task_id TEXT PRIMARY KEY,
     n BIGINT GENERATED ALWAYS AS IDENTITY,
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
     finished_at TEXT,
     pending_approval TEXT,
     resume_state TEXT
   );
   CREATE INDEX tasks_created ON tasks (created_at);
   CREATE INDEX tasks_status ON tasks (status);
   CREATE TABLE task_events (
     task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
     seq INTEGER NOT NULL,
     type TEXT NOT NULL,
     at TEXT NOT NULL,
     duration_ms DOUBLE PRECISION,
     data TEXT NOT NULL,
     PRIMARY KEY (task_id, seq)
   );`,
  // A queued task's request (steps, duration, exposure), to start it later, also after a restart.
  'ALTER TABLE tasks ADD COLUMN request TEXT',
  // Leases (who runs a task, until when, under which fence), a human's decision recorded here, and the
  // tool calls of a task's checkpointed reply.
  `ALTER TABLE tasks ADD COLUMN lease_owner TEXT;
   ALTER TABLE tasks ADD COLUMN lease_until TIMESTAMPTZ;
   ALTER TABLE tasks ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
   ALTER TABLE tasks ADD COLUMN decision TEXT;
   CREATE TABLE task_calls (
     task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
     idx INTEGER NOT NULL,
     call_id TEXT NOT NULL,
     finished BOOLEAN NOT NULL,
     result TEXT,
     PRIMARY KEY (task_id, idx)
   );`,
  // The console: its logins and one-time login codes; listings by status, newest first.
  `CREATE TABLE console_logins (
     id_hash TEXT PRIMARY KEY,
     kind TEXT NOT NULL,
     role TEXT NOT NULL,
     sealed TEXT NOT NULL,
     expires_at BIGINT NOT NULL
   );
   CREATE INDEX tasks_status_created ON tasks (status, created_at);`,
  // Leases in milliseconds since the epoch, as SQLite keeps them: taken and judged on the store's clock
  // (StoreOptions.now), one representation on both databases.
  `ALTER TABLE tasks ALTER COLUMN lease_until TYPE BIGINT
     USING (extract(epoch FROM lease_until) * 1000)::bigint`,
];
