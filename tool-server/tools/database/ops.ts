import type Database from 'better-sqlite3';
import { prepareReadOnly, SqlRefused } from './guard.ts';
import { type FileIdentity, openReadOnly } from './open.ts';
import { describeTable, listTables } from './schema.ts';

// What the query process (worker.ts) does with one job: open the database read-only (guard.ts), run a
// query or read the schema, shape the answer as plain JSON, close. Synchronous, since it runs in a process of
// its own that the tool-server kills at the deadline.

/** A bound parameter value as the model sends it (booleans become 1 and 0, as SQLite stores them). */
export type SqlValue = string | number | boolean | null;

/** Parameters: an array for `?`/`?NNN` placeholders, or an object for `:name`, `@name` and `$name`. */
export type SqlParams = SqlValue[] | Record<string, SqlValue>;

/** What every job carries: the file the path guard admitted, and the identity it had when it was checked. */
interface JobBase {
  file: string;
  expect?: FileIdentity;
  busyTimeoutMs: number;
}

/** One unit of work for the query process. */
export type DbJob =
  | (JobBase & {
      op: 'query';
      sql: string;
      params?: SqlParams;
      maxRows: number;
      maxBytes: number;
    })
  | (JobBase & { op: 'tables'; includeSystem: boolean })
  | (JobBase & { op: 'describe'; table: string });

/** The query process's answer to one job. */
export type DbReply = { ok: true; result: unknown } | { ok: false; error: string };

/** Longest text value returned whole, and how much of a blob is shown. */
export const CELL_LIMITS = { textChars: 4096, blobPreviewBytes: 64 } as const;

/** A SQLite value as JSON: big integers as decimal strings, blobs described, long text cut with a marker. */
function jsonCell(v: unknown, cut: { cells: number }): unknown {
  if (typeof v === 'bigint') {
    const safe = v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER);
    return safe ? Number(v) : v.toString();
  }
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
  if (typeof v === 'string' && v.length > CELL_LIMITS.textChars) {
    cut.cells++;
    return `${v.slice(0, CELL_LIMITS.textChars)}… [cut: ${v.length} characters in all]`;
  }
  if (Buffer.isBuffer(v)) {
    const shown = v.subarray(0, CELL_LIMITS.blobPreviewBytes);
    if (shown.length < v.length) cut.cells++;
    return {
      blob_bytes: v.length,
      base64: shown.toString('base64'),
      ...(shown.length < v.length ? { cut: true } : {}),
    };
  }
  return v;
}

/** better-sqlite3's bind arguments; an empty array or object binds nothing. */
function bindable(params: SqlParams): unknown[] {
  const value = (v: SqlValue) => (typeof v === 'boolean' ? (v ? 1 : 0) : v);
  if (Array.isArray(params)) return params.map(value);
  if (Object.keys(params).length === 0) return [];
  // Names may be given with their prefix (":id", "@id", "$id"); better-sqlite3 wants them without.
  const named = Object.fromEntries(
    Object.entries(params).map(([k, v]) => [k.replace(/^[:@$]/, ''), value(v)]),
  );
  return [named];
}

function runQuery(db: Database.Database, job: Extract<DbJob, { op: 'query' }>) {
  const stmt = prepareReadOnly(db, job.sql, job.params === undefined ? [] : bindable(job.params));
  stmt.raw(true);
  stmt.safeIntegers(true);
  const columns = stmt.columns().map((c) => ({ name: c.name, type: c.type }));
  const started = performance.now();
  const rows: unknown[][] = [];
  const cut = { cells: 0 };
  let bytes = 0;
  let stopped: 'rows' | 'bytes' | undefined;
  for (const raw of stmt.iterate() as Iterable<unknown[]>) {
    if (rows.length >= job.maxRows) {
      stopped = 'rows';
      break;
    }
    const row = raw.map((v) => jsonCell(v, cut));
    const size = Buffer.byteLength(JSON.stringify(row)) + 1;
    if (bytes + size > job.maxBytes) {
      stopped = 'bytes';
      break;
    }
    rows.push(row);
    bytes += size;
  }
  const elapsed = Math.round((performance.now() - started) * 100) / 100;
  const notes: string[] = [];
  if (stopped === 'rows')
    notes.push(`more rows exist than max_rows (${job.maxRows}); use LIMIT/OFFSET or narrow the WHERE`);
  if (stopped === 'bytes')
    notes.push(`the rows stopped at the ${job.maxBytes}-byte result cap; select fewer columns or rows`);
  if (cut.cells > 0) {
    notes.push(
      `${cut.cells} value(s) were cut (text over ${CELL_LIMITS.textChars} characters, blobs over ` +
        `${CELL_LIMITS.blobPreviewBytes} bytes); read them in parts with substr()`,
    );
  }
  return {
    columns,
    rows,
    row_count: rows.length,
    truncated: stopped !== undefined || cut.cells > 0,
    elapsed_ms: elapsed,
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
  };
}

/** SQLite's error codes in words the model can act on; the engine's own message is kept. */
function describeError(err: unknown, job: DbJob): string {
  if (err instanceof SqlRefused) return err.message;
  const e = err as { code?: unknown; message?: string };
  const message = e?.message ?? String(err);
  const code = typeof e?.code === 'string' ? e.code : '';
  if (message.includes('more than one statement')) {
    return 'Only one statement per call: the SQL contains more than one statement; send them one at a time';
  }
  if (err instanceof RangeError && /parameter/i.test(message)) {
    return (
      `The parameters do not fit the statement: ${message}. Pass \`params\` as an array for ? or ?NNN ` +
      'placeholders, or as an object keyed by name for :name, @name or $name placeholders'
    );
  }
  if (code.startsWith('SQLITE_NOTADB')) return `${job.file} is not a SQLite database (or it is encrypted)`;
  if (code.startsWith('SQLITE_CORRUPT')) return `The database file ${job.file} is malformed: ${message}`;
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return `The database is locked by another connection (waited ${job.busyTimeoutMs} ms); try again later`;
  }
  if (code.startsWith('SQLITE_CANTOPEN')) return `Cannot open the database file ${job.file}: ${message}`;
  if (code.startsWith('SQLITE_READONLY')) return `The database tools only read; SQLite refused: ${message}`;
  if (code !== '') return `SQL error: ${message}`;
  return `Reading the database failed: ${message}`;
}

/** Runs one job on a fresh read-only connection and always answers (errors become words, never throws). */
export function runJob(job: DbJob): DbReply {
  let db: Database.Database | undefined;
  try {
    db = openReadOnly(job.file, job.busyTimeoutMs, job.expect);
    if (job.op === 'query') return { ok: true, result: runQuery(db, job) };
    if (job.op === 'tables') return { ok: true, result: listTables(db, job.includeSystem) };
    return { ok: true, result: describeTable(db, job.table) };
  } catch (err) {
    return { ok: false, error: describeError(err, job) };
  } finally {
    db?.close();
  }
}
