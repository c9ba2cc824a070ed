import { z } from 'zod';
import { defineTool, READ_ONLY, type Tool, type ToolContext } from '../../kit/define.ts';
import { readableDirectory } from '../files/dirs.ts';
import { type CheckedDatabase, databaseFile, FIND_LIMITS, findDatabases } from './find.ts';
import type { DbJob } from './ops.ts';
import { createDbRunner, type DbRunner } from './runner.ts';

// database_tools: find SQLite files under the roots, list and describe their tables, and run read-only
// queries. Every database access happens in a query process (runner.ts) on a hardened read-only
// connection (guard.ts), under a deadline; the tool-server's own thread only walks directories.

/** What the database tools take beyond every tool's context. */
export interface DatabaseToolContext extends ToolContext {
  databases?: DatabaseContext;
}

/** The database tools' settings; every field has a default (DB_DEFAULTS). */
export interface DatabaseContext {
  /** The tool-server's pool of query processes; without one, each call starts and ends its own process. */
  runner?: DbRunner;
  /** Deadline of one call (queue, process start and SQLite work); past it the process is killed. */
  timeoutMs?: number;
  /** The most rows one query returns (a call's max_rows is capped to it). */
  maxRows?: number;
  /** Cap on the JSON size of one query's rows. */
  maxResultBytes?: number;
}

/** The limits every deployment starts from (README, "Configuration"). */
export const DB_DEFAULTS = {
  timeoutMs: 10_000,
  maxRows: 1000,
  maxResultBytes: 256 * 1024,
  rows: 100,
} as const;

function settings(ctx: DatabaseToolContext) {
  const db = ctx.databases ?? {};
  const timeoutMs = db.timeoutMs ?? DB_DEFAULTS.timeoutMs;
  return {
    timeoutMs,
    maxRows: db.maxRows ?? DB_DEFAULTS.maxRows,
    maxResultBytes: db.maxResultBytes ?? DB_DEFAULTS.maxResultBytes,
    // A database locked by a writer is waited for, but well inside the call's deadline.
    busyTimeoutMs: Math.max(1, Math.min(2000, Math.floor(timeoutMs / 2))),
  };
}

/**
 * Runs a job on the context's pool, or on a process of its own that ends with the call. `T`: what the job's
 * op answers (ops.ts), which crosses the process boundary as JSON.
 */
async function runDb<T>(ctx: DatabaseToolContext, job: DbJob, timeoutMs: number): Promise<T> {
  if (ctx.databases?.runner) return (await ctx.databases.runner.run(job, timeoutMs, ctx.session)) as T;
  const once = createDbRunner({ maxProcesses: 1, maxIdle: 0 });
  try {
    return (await once.run(job, timeoutMs)) as T;
  } finally {
    once.close();
  }
}

const identity = (db: CheckedDatabase) => ({ file: db.real, expect: { dev: db.dev, ino: db.ino } });

const dbPath = z
  .string()
  .describe(
    'The SQLite file: absolute, or relative to the first allowed directory (list_databases finds them)',
  );

const Scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);

const Database = z.string().describe('The SQLite file, as resolved');

/** A value of a row as query returns it (ops.ts jsonCell). */
const Cell = z.union([
  z.string().describe('Text (a long one cut with a marker), or an integer beyond 2^53 in decimal'),
  z.number(),
  z.null(),
  z.object({
    blob_bytes: z.number(),
    base64: z.string().describe("The blob's first bytes"),
    cut: z.literal(true).optional(),
  }),
]);

/** What the query process answers to each op (ops.ts, schema.ts); the tools add `database`. */
const TableList = z.object({
  tables: z.array(
    z.object({
      name: z.string(),
      type: z.string().describe('table, view, virtual or shadow'),
      columns: z.number(),
    }),
  ),
  table_count: z.number(),
});
const TableShape = z.object({
  table: z.string(),
  type: z.string(),
  columns: z.array(
    z.object({
      name: z.string(),
      type: z.string().nullable().describe('The declared type; null when none'),
      not_null: z.boolean(),
      default: z.string().nullable().describe('The default as SQL text'),
      primary_key: z.boolean(),
      generated: z.enum(['virtual', 'stored']).optional(),
      hidden: z.literal(true).optional(),
    }),
  ),
  primary_key: z.array(z.string()).describe('Primary key columns, in key order'),
  foreign_keys: z.array(
    z.object({
      columns: z.array(z.string()),
      references: z.object({ table: z.string(), columns: z.array(z.string().nullable()) }),
      on_update: z.string(),
      on_delete: z.string(),
    }),
  ),
  indexes: z.array(
    z.object({
      name: z.string(),
      unique: z.boolean(),
      origin: z.string(),
      partial: z.boolean(),
      columns: z.array(z.string()),
    }),
  ),
  row_count: z.number(),
  without_rowid: z.boolean(),
  strict: z.boolean(),
  sql: z.string().nullable().describe('The CREATE statement'),
});
const QueryRows = z.object({
  columns: z.array(z.object({ name: z.string(), type: z.string().nullable() })),
  rows: z.array(z.array(Cell)).describe('Each row in column order'),
  row_count: z.number(),
  truncated: z.boolean(),
  elapsed_ms: z.number(),
  note: z.string().optional().describe('What was left out, and how to get it'),
});

/** Finds SQLite databases under the roots, so the model need not guess file names. */
export const listDatabases = defineTool({
  name: 'list_databases',
  description:
    'Find SQLite database files under the allowed directories (or under `path`), recognised by their header ' +
    '("SQLite format 3"), whatever their extension; a 0-byte .db/.sqlite file is listed as empty. Symlinks are ' +
    `not followed; .git and node_modules are skipped; at most ${FIND_LIMITS.depth} levels deep. Returns ` +
    '{databases: [{path, size_bytes, modified}], database_count, truncated}.',
  input: z.object({
    path: z.string().optional().describe('Directory to search (default: every allowed directory)'),
    max_results: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .optional()
      .describe('Most databases to list (default 100)'),
  }),
  output: z.object({
    searched: z.array(z.string()).describe('The directories searched'),
    databases: z.array(
      z.object({
        path: z.string(),
        size_bytes: z.number(),
        modified: z.string().nullable(),
        empty: z.literal(true).optional().describe('A 0-byte file: a database with no tables'),
      }),
    ),
    database_count: z.number(),
    truncated: z.boolean(),
    note: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), error: z.string() })).optional(),
  }),
  annotations: { title: 'List databases', ...READ_ONLY },
  async execute(args, ctx: DatabaseToolContext) {
    const allowed = ctx.paths.allowed();
    const starts =
      args.path !== undefined
        ? [await readableDirectory(ctx, args.path)]
        : [...new Set([...allowed.read_write, ...allowed.read_only])];
    const { found, truncated, visits, errors } = await findDatabases(ctx, starts, args.max_results ?? 100);
    return {
      searched: starts,
      databases: found,
      database_count: found.length,
      truncated,
      ...(truncated
        ? { note: `stopped after ${found.length} databases or ${visits} entries; search a subdirectory` }
        : {}),
      ...(errors.length > 0 ? { errors } : {}),
    };
  },
});

/** The tables and views of one database, the first thing a model needs before writing SQL. */
export const listTables = defineTool({
  name: 'list_tables',
  description:
    'List the tables and views of a SQLite database: {database, tables: [{name, type (table|view|virtual), ' +
    'columns}], table_count}. Internal sqlite_* and shadow tables only with include_system.',
  input: z.object({
    path: dbPath,
    include_system: z.boolean().optional().describe('Also list sqlite_* and shadow tables (default false)'),
  }),
  output: TableList.extend({ database: Database }),
  annotations: { title: 'List tables', ...READ_ONLY },
  async execute(args, ctx: DatabaseToolContext) {
    const db = await databaseFile(ctx, args.path);
    const s = settings(ctx);
    const result = await runDb<z.infer<typeof TableList>>(
      ctx,
      {
        op: 'tables',
        ...identity(db),
        busyTimeoutMs: s.busyTimeoutMs,
        includeSystem: args.include_system ?? false,
      },
      s.timeoutMs,
    );
    return { database: db.real, ...result };
  },
});

/** One table's shape: what a model needs to write correct joins and filters. */
export const describeTable = defineTool({
  name: 'describe_table',
  description:
    'Describe a table or view: {database, table, type, columns: [{name, type, not_null, default, ' +
    'primary_key}], primary_key, foreign_keys: [{columns, references: {table, columns}, on_update, on_delete}], ' +
    'indexes: [{name, unique, origin, partial, columns}], row_count, without_rowid, strict, sql}.',
  input: z.object({
    path: dbPath,
    table: z.string().min(1).describe('Table or view name (case-insensitive, as SQLite treats names)'),
  }),
  output: TableShape.extend({ database: Database }),
  annotations: { title: 'Describe table', ...READ_ONLY },
  async execute(args, ctx: DatabaseToolContext) {
    const db = await databaseFile(ctx, args.path);
    const s = settings(ctx);
    const result = await runDb<z.infer<typeof TableShape>>(
      ctx,
      { op: 'describe', ...identity(db), busyTimeoutMs: s.busyTimeoutMs, table: args.table },
      s.timeoutMs,
    );
    return { database: db.real, ...result };
  },
});

/** A read-only SQL query with bound parameters, capped and under a deadline. */
export const query = defineTool({
  name: 'query',
  description:
    'Run one read-only SQL statement on a SQLite database: SELECT, WITH … SELECT, VALUES or EXPLAIN [QUERY ' +
    "PLAN] (pragmas through their functions, e.g. SELECT * FROM pragma_table_info('t')). Values go in `params`, " +
    'never into the SQL text: an array for ? placeholders or an object for :name placeholders. Returns ' +
    '{columns: [{name, type}], rows (arrays, in column order), row_count, truncated, elapsed_ms}; truncated is ' +
    'true when rows were left out (max_rows, result size cap) or long values were cut. Writes, ATTACH, VACUUM, ' +
    'PRAGMA statements and several statements at once are refused; a query past the time limit is stopped.',
  input: z.object({
    path: dbPath,
    sql: z.string().min(1).max(100_000).describe('One statement; a trailing semicolon is fine'),
    params: z
      .union([z.array(Scalar), z.record(z.string(), Scalar)])
      .optional()
      .describe('Bound values: [1, "x"] for ?, or {"id": 1} for :id / @id / $id'),
    max_rows: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .optional()
      .describe(`Most rows to return (default ${DB_DEFAULTS.rows}; the service caps it)`),
  }),
  output: QueryRows.extend({ database: Database }),
  annotations: { title: 'Query (read-only)', ...READ_ONLY },
  async execute(args, ctx: DatabaseToolContext) {
    const db = await databaseFile(ctx, args.path);
    const s = settings(ctx);
    const job: DbJob = {
      op: 'query',
      ...identity(db),
      busyTimeoutMs: s.busyTimeoutMs,
      sql: args.sql,
      params: args.params,
      maxRows: Math.min(args.max_rows ?? DB_DEFAULTS.rows, s.maxRows),
      maxBytes: s.maxResultBytes,
    };
    const result = await runDb<z.infer<typeof QueryRows>>(ctx, job, s.timeoutMs);
    return { database: db.real, ...result };
  },
});

/** The database_tools set, in the order the tool-server lists them. */
export const databaseTools: Tool<DatabaseToolContext>[] = [listDatabases, listTables, describeTable, query];
