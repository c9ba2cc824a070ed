import { type CreateTableBuilder, type Kysely, sql } from 'kysely';
import type { Migration } from 'kysely/migration';
import { atomically, type DialectName, tablesFound } from '../../lib/db/kysely.ts';

// The gateway's migrations (lib/db/kysely.ts migrate(), recorded in `gateway_migrations`), one set for both
// databases. The first one makes the schema of schema.ts on a new database, and brings to it what the store
// before Kysely left: a gateway.db with no versions (tables made by CREATE TABLE IF NOT EXISTS, columns added by
// probing, no unique pending approval), or PostgreSQL at versions 1–4 of `mcp-gateway` in schema_migrations
// (booleans as BOOLEAN). Every row stays. A later change of the schema is a new numbered migration here, never
// an edit of an applied one.

/** The component whose migrations these are (its table: `gateway_migrations`). */
export const GATEWAY_COMPONENT = 'gateway';

/** The newest schema_migrations version of `mcp-gateway` the store before Kysely wrote on PostgreSQL. */
const LAST_NUMBERED_VERSION = 4;

/** The gateway's migrations for `dialect`, by name (applied in name order). */
export function gatewayMigrations(dialect: DialectName): Record<string, Migration> {
  return {
    '001_one_schema': { up: (db) => oneSchema(db, dialect) },
    '002_for_user': { up: (db) => forUser(db, dialect) },
    '003_learned_keywords': { up: (db) => learnedKeywords(db, dialect) },
    '004_tool_subsets': { up: (db) => toolSubsets(db, dialect) },
  };
}

function oneSchema(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  const pg = dialect === 'postgres';
  // All or nothing on both databases (atomically). (Each step is safe to run again as well.)
  return atomically(db, dialect, async () => {
    const before = await tablesFound(db);
    if (pg && before.has('schema_migrations')) {
      const { rows } = await sql<{ version: number | null }>`
        SELECT max(version) AS version FROM schema_migrations WHERE component = 'mcp-gateway'`.execute(db);
      const version = rows[0]?.version ?? 0;
      if (version > LAST_NUMBERED_VERSION) {
        throw new Error(
          `the gateway's tables are at version ${version} of schema_migrations, newer than this toolshift knows ` +
            `(${LAST_NUMBERED_VERSION}): run the toolshift that made them, or a newer one`,
        );
      }
    }
    await createTables(db, pg);
    // gateway.db from before actors were recorded: the columns, NULL for its old rows.
    const audit = before.get('audit');
    if (audit) {
      for (const column of ['actor', 'task_id']) {
        if (!audit.has(column)) await db.schema.alterTable('audit').addColumn(column, 'text').execute();
      }
    }
    // PostgreSQL's booleans become the integers both databases keep (the values as they were: 1 true, 0 false).
    if (pg) {
      for (const [table, column] of [
        ['toolset_settings', 'enabled'],
        ['toolset_defaults', 'active'],
        ['audit', 'ok'],
      ] as const) {
        const type = before.get(table)?.get(column);
        if (type === 'bool' || type === 'boolean') {
          await sql`ALTER TABLE ${sql.table(table)} ALTER COLUMN ${sql.ref(column)} TYPE integer
            USING ${sql.ref(column)}::integer`.execute(db);
        }
      }
    }
    // One pending approval per request, whichever replica asks: two left pending by a second replica's ask
    // (gateway.db and PostgreSQL's first version allowed it) keep the first, the later expire.
    await sql`UPDATE approvals SET status = 'expired', decided_at = created_at
      WHERE status = 'pending' AND EXISTS (SELECT 1 FROM approvals b WHERE b.status = 'pending'
        AND b.session_id = approvals.session_id AND b.kind = approvals.kind AND b.subject = approvals.subject
        AND b.args_hash = approvals.args_hash
        AND (b.created_at < approvals.created_at OR (b.created_at = approvals.created_at AND b.id < approvals.id)))`.execute(
      db,
    );
    await createIndexes(db);
  });
}

/**
 * Whose work a row is (`user:<id>`, null for the operator's and the system's and for rows from before): the audit's
 * rows and the approvals, listed by it for a user who sees only their own (and their team's).
 */
function forUser(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  return atomically(db, dialect, async () => {
    const before = await tablesFound(db);
    for (const table of ['audit', 'approvals']) {
      if (!before.get(table)?.has('for_user')) {
        await db.schema.alterTable(table).addColumn('for_user', 'text').execute();
      }
    }
    await db.schema
      .createIndex('audit_for_user')
      .ifNotExists()
      .on('audit')
      .columns(['for_user', 'id'])
      .execute();
    await db.schema
      .createIndex('approvals_for_user')
      .ifNotExists()
      .on('approvals')
      .columns(['for_user', 'created_at'])
      .execute();
    // One pending approval of a request per session and user: two users' same call in one session (a fixed
    // view's, shared by every client) are two approvals, each decided and spent by its own user's.
    await sql`DROP INDEX IF EXISTS approvals_one_pending`.execute(db);
    await sql`CREATE UNIQUE INDEX approvals_one_pending
      ON approvals (session_id, kind, subject, args_hash, (COALESCE(for_user, ''))) WHERE status = 'pending'`.execute(
      db,
    );
  });
}

/** A toolset active with only some of its tools (ACTIVATE with `tools`): their names, null for all of them. */
function toolSubsets(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  return atomically(db, dialect, async () => {
    const before = await tablesFound(db);
    if (!before.get('session_toolsets')?.has('tools')) {
      await db.schema.alterTable('session_toolsets').addColumn('tools', 'text').execute();
    }
  });
}

/** Discovery's learned keywords per toolset, and how far the learner has read the audit (store/learned-keywords.ts). */
function learnedKeywords(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  return atomically(db, dialect, async () => {
    await db.schema
      .createTable('learned_keywords')
      .ifNotExists()
      .addColumn('toolset_id', 'text', (c) => c.notNull())
      .addColumn('term', 'text', (c) => c.notNull())
      .addColumn('weight', 'double precision', (c) => c.notNull())
      .addColumn('tasks', 'integer', (c) => c.notNull())
      .addColumn('users', 'integer', (c) => c.notNull())
      .addColumn('last_user', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('learned_keywords_pkey', ['toolset_id', 'term'])
      .execute();
    await db.schema
      .createTable('learn_cursor')
      .ifNotExists()
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('last_id', 'bigint', (c) => c.notNull())
      .addColumn('at', 'bigint', (c) => c.notNull())
      .execute();
    // Retention deletes by age.
    await db.schema
      .createIndex('learned_keywords_updated')
      .ifNotExists()
      .on('learned_keywords')
      .column('updated_at')
      .execute();
  });
}

/** Every table of the schema, in groups by what they keep (the indexes follow, createIndexes). */
async function createTables(db: Kysely<unknown>, pg: boolean): Promise<void> {
  const table = (name: string) => db.schema.createTable(name).ifNotExists();
  await sessionTables(table);
  await auditTable(table, pg);
  await pinTables(table);
  await approvalTable(table);
  await faceTables(table);
  await callKeyTables(table);
}

type NewTable = (name: string) => CreateTableBuilder<string, never>;

/** Sessions and their toolsets, the operator's ceiling and the user's defaults. */
async function sessionTables(table: NewTable): Promise<void> {
  await table('sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  // A session's rows go with it (ON DELETE CASCADE; lib/db/sqlite.ts turns SQLite's foreign keys on).
  await table('session_toolsets')
    .addColumn('session_id', 'text', (c) => c.notNull().references('sessions.id').onDelete('cascade'))
    .addColumn('toolset_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('session_toolsets_pkey', ['session_id', 'toolset_id'])
    .execute();
  await table('toolset_settings')
    .addColumn('toolset_id', 'text', (c) => c.primaryKey())
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .execute();
  await table('toolset_defaults')
    .addColumn('toolset_id', 'text', (c) => c.primaryKey())
    .addColumn('active', 'integer', (c) => c.notNull())
    .execute();
}

async function auditTable(table: NewTable, pg: boolean): Promise<void> {
  // The audit's id is its order: SQLite's rowid, PostgreSQL's sequence.
  await table('audit')
    .addColumn('id', pg ? 'bigserial' : 'integer', (c) => c.primaryKey())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text')
    .addColumn('task_id', 'text')
    .addColumn('actor', 'text')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('ok', 'integer', (c) => c.notNull())
    .addColumn('detail', 'text')
    .execute();
}

/** The upstream toolsets' last listings and their approved definitions. */
async function pinTables(table: NewTable): Promise<void> {
  await table('upstream_tools')
    .addColumn('toolset_id', 'text', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('definition', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('upstream_tools_pkey', ['toolset_id', 'tool'])
    .execute();
  await table('pinned_toolsets')
    .addColumn('toolset_id', 'text', (c) => c.primaryKey())
    .addColumn('first_at', 'text', (c) => c.notNull())
    .execute();
  await table('tool_pins')
    .addColumn('toolset_id', 'text', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull())
    .addColumn('definition', 'text', (c) => c.notNull())
    .addColumn('approved_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('tool_pins_pkey', ['toolset_id', 'tool'])
    .execute();
}

async function approvalTable(table: NewTable): Promise<void> {
  await table('approvals')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('arguments', 'text')
    .addColumn('args_hash', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('decided_at', 'bigint')
    .addColumn('decided_by', 'text')
    .addColumn('decision_reason', 'text')
    .execute();
}

/** The MCP face's handles and its legacy sessions kept across restarts. */
async function faceTables(table: NewTable): Promise<void> {
  await table('mcp_handles')
    .addColumn('handle', 'text', (c) => c.primaryKey())
    .addColumn('credential', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_used_at', 'bigint', (c) => c.notNull())
    .execute();
  await table('mcp_legacy_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('credential', 'text')
    .addColumn('own_session', 'text', (c) => c.notNull())
    .addColumn('handle', 'text')
    .addColumn('init', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen', 'bigint', (c) => c.notNull())
    .execute();
}

/** Keyed calls, each run at most once, and the tasks' fences. */
async function callKeyTables(table: NewTable): Promise<void> {
  await table('call_keys')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('task_id', 'text')
    .addColumn('fence', 'bigint')
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('outcome', 'text')
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('finished_at', 'bigint')
    .execute();
  await table('task_fences')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('fence', 'bigint', (c) => c.notNull())
    .addColumn('seen_at', 'bigint', (c) => c.notNull())
    .execute();
}

async function createIndexes(db: Kysely<unknown>): Promise<void> {
  const index = async (name: string, table: string, columns: string[]) =>
    db.schema.createIndex(name).ifNotExists().on(table).columns(columns).execute();
  await index('sessions_created', 'sessions', ['created_at']);
  // A DISABLE removes the toolset from every session.
  await index('session_toolsets_toolset', 'session_toolsets', ['toolset_id']);
  // The listing pages by id within a session, task, actor or kind; retention deletes by age.
  await index('audit_session', 'audit', ['session_id', 'id']);
  await index('audit_task', 'audit', ['task_id', 'id']);
  await index('audit_at', 'audit', ['at']);
  await index('audit_actor', 'audit', ['actor', 'id']);
  await index('audit_kind', 'audit', ['kind', 'id']);
  await index('approvals_key', 'approvals', ['session_id', 'kind', 'subject', 'args_hash', 'status']);
  await sql`CREATE UNIQUE INDEX IF NOT EXISTS approvals_one_pending
    ON approvals (session_id, kind, subject, args_hash) WHERE status = 'pending'`.execute(db);
  await index('mcp_handles_credential', 'mcp_handles', ['credential', 'last_used_at']);
  await index('mcp_legacy_sessions_seen', 'mcp_legacy_sessions', ['last_seen']);
  await index('call_keys_started', 'call_keys', ['started_at']);
  await index('task_fences_seen', 'task_fences', ['seen_at']);
}
