import { type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';
import { atomically, type DialectName, type TablesFound, tablesFound } from '../../lib/db/kysely.ts';
import { checkpointParts } from './migrations-checkpoints.ts';
import { webhookDeliveries } from './migrations-webhooks.ts';

// The agent-server's migrations (lib/db/kysely.ts migrate(), recorded in `agent_migrations`), one set for both
// databases. The first one makes the schema of schema.ts on a new database, and brings to it what the stores
// before Kysely left: agent.db with no versions (tables made by CREATE TABLE IF NOT EXISTS) or at versions 1–5 of
// `agent-server` in schema_migrations, PostgreSQL at versions 1–5 there (leases as TIMESTAMPTZ before 5, call
// records' `finished` as BOOLEAN). Every row stays. A later change of the schema is a new numbered migration here,
// never an edit of an applied one (with a fixture of the database before it: tests/fixtures/agent-store/).

/** The component whose migrations these are (its table: `agent_migrations`). */
export const AGENT_COMPONENT = 'agent';

/** The newest schema_migrations version of `agent-server` the stores before Kysely wrote (SQLite 5, PostgreSQL 5). */
const LAST_NUMBERED_VERSION = 5;

/** The agent-server's migrations for `dialect`, by name (applied in name order). */
export function agentMigrations(dialect: DialectName): Record<string, Migration> {
  return {
    '001_one_schema': { up: (db) => oneSchema(db, dialect) },
    '002_threads': { up: (db) => threads(db, dialect) },
    '003_webhooks': { up: webhookDeliveries },
    '004_checkpoint_parts': { up: (db) => checkpointParts(db, dialect) },
  };
}

/** Refuses a database a newer toolshift numbered past what this one knows. */
async function checkNumbered(db: Kysely<unknown>, before: TablesFound): Promise<void> {
  if (!before.has('schema_migrations')) return;
  const { rows } = await sql<{ version: number | null }>`
    SELECT max(version) AS version FROM schema_migrations WHERE component = 'agent-server'`.execute(db);
  const version = Number(rows[0]?.version ?? 0);
  if (version > LAST_NUMBERED_VERSION) {
    throw new Error(
      `the task tables are at version ${version} of schema_migrations, newer than this toolshift knows ` +
        `(${LAST_NUMBERED_VERSION}): run the toolshift that made them, or a newer one`,
    );
  }
}

/** The schema of schema.ts on a new database, or brought to it from an older one. (Each step is safe to run again.) */
function oneSchema(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  const pg = dialect === 'postgres';
  return atomically(db, dialect, async () => {
    const before = await tablesFound(db);
    await checkNumbered(db, before);
    await createTables(db, pg);
    await addMissingColumns(db, before, pg);
    if (pg) await pgTypes(db, before);
    await createIndexes(db);
  });
}

async function createTables(db: Kysely<unknown>, pg: boolean): Promise<void> {
  const table = (name: string) => db.schema.createTable(name).ifNotExists();
  // `n`: the order of insertion (PostgreSQL's identity; on SQLite set by a trigger).
  await table('tasks')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('n', 'bigint', (c) => (pg ? c.generatedAlwaysAsIdentity() : c))
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('goal', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('final_answer', 'text')
    .addColumn('error', 'text')
    .addColumn('steps', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('usage', 'text', (c) =>
      c.notNull().defaultTo('{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}'),
    )
    .addColumn('toolsets_used', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('tokens', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .execute();
  // A task's rows go with it (ON DELETE CASCADE; lib/db/sqlite.ts turns SQLite's foreign keys on).
  await table('task_events')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('duration_ms', 'double precision')
    .addColumn('data', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('task_events_pkey', ['task_id', 'seq'])
    .execute();
  await table('task_calls')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('idx', 'integer', (c) => c.notNull())
    .addColumn('call_id', 'text', (c) => c.notNull())
    .addColumn('finished', 'integer', (c) => c.notNull())
    .addColumn('result', 'text')
    .addPrimaryKeyConstraint('task_calls_pkey', ['task_id', 'idx'])
    .execute();
  await table('console_logins')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('sealed', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
}

/** Columns of `tasks` added since its first version, each with its type. */
const LATER_COLUMNS = [
  ['tokens', 'text'],
  ['pending_approval', 'text'],
  ['resume_state', 'text'],
  ['request', 'text'],
  ['lease_owner', 'text'],
  ['lease_until', 'bigint'],
  ['decision', 'text'],
] as const;

/** What an older `tasks` lacks, empty for its rows (`fence` 0, `n` in the order the rows were made). */
async function addMissingColumns(db: Kysely<unknown>, before: TablesFound, pg: boolean): Promise<void> {
  // A table made just now has the columns createTables gives it.
  const have = new Set(before.get('tasks')?.keys() ?? ['n', 'tokens']);
  const tasks = db.schema.alterTable('tasks');
  for (const [column, type] of LATER_COLUMNS)
    if (!have.has(column)) await tasks.addColumn(column, type).execute();
  if (!have.has('fence')) await tasks.addColumn('fence', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
  if (pg) return;
  if (!have.has('n')) {
    await tasks.addColumn('n', 'bigint').execute();
    await sql`UPDATE tasks SET n = rowid`.execute(db);
  }
  // SQLite has no identity column: a new row's `n` is the next one (not its rowid, which VACUUM renumbers).
  await sql`CREATE TRIGGER IF NOT EXISTS tasks_n AFTER INSERT ON tasks WHEN NEW.n IS NULL
    BEGIN UPDATE tasks SET n = (SELECT COALESCE(MAX(n), 0) + 1 FROM tasks) WHERE rowid = NEW.rowid; END`.execute(
    db,
  );
}

/** PostgreSQL's older types become the ones both databases keep (the values as they were). */
async function pgTypes(db: Kysely<unknown>, before: TablesFound): Promise<void> {
  // Leases in milliseconds since the epoch, as SQLite keeps them (version 5 did this already).
  const lease = before.get('tasks')?.get('lease_until');
  if (lease?.startsWith('timestamp')) {
    await sql`ALTER TABLE tasks ALTER COLUMN lease_until TYPE bigint
      USING (extract(epoch FROM lease_until) * 1000)::bigint`.execute(db);
  }
  const finished = before.get('task_calls')?.get('finished');
  if (finished === 'bool' || finished === 'boolean') {
    await sql`ALTER TABLE task_calls ALTER COLUMN finished TYPE integer USING finished::integer`.execute(db);
  }
}

async function createIndexes(db: Kysely<unknown>): Promise<void> {
  const index = (name: string, table: string, columns: string[]) =>
    db.schema.createIndex(name).ifNotExists().on(table).columns(columns).execute();
  await index('tasks_created', 'tasks', ['created_at']);
  await index('tasks_status', 'tasks', ['status']);
  // Listings by status, newest first; keyset pages by (created_at, n).
  await index('tasks_status_created', 'tasks', ['status', 'created_at']);
  // One task per insertion number, on both (PostgreSQL's identity alone did not say so).
  await db.schema.createIndex('tasks_n').ifNotExists().unique().on('tasks').column('n').execute();
}

/** Threads: a table of them, and each task's thread and transcript (tasks made before have none). */
function threads(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  return atomically(db, dialect, async () => {
    await db.schema
      .createTable('threads')
      .ifNotExists()
      .addColumn('thread_id', 'text', (c) => c.primaryKey())
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('owner', 'text', (c) => c.notNull())
      .addColumn('title', 'text', (c) => c.notNull())
      .addColumn('webhook', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    // A turn's thread must exist: a thread deleted while a turn of it is recorded refuses one or the other.
    await db.schema
      .alterTable('tasks')
      .addColumn('thread_id', 'text', (c) => c.references('threads.thread_id'))
      .execute();
    await db.schema.alterTable('tasks').addColumn('transcript', 'text').execute();
    // A thread's turns in order; a claim asks whether a thread has an earlier turn not ended.
    await db.schema
      .createIndex('tasks_thread')
      .ifNotExists()
      .on('tasks')
      .columns(['thread_id', 'n'])
      .execute();
    // Listings by owner, newest first (keyset pages by (created_at, thread_id)); retention by last activity.
    await db.schema
      .createIndex('threads_owner_created')
      .ifNotExists()
      .on('threads')
      .columns(['owner', 'created_at'])
      .execute();
    await db.schema.createIndex('threads_updated').ifNotExists().on('threads').column('updated_at').execute();
  });
}
