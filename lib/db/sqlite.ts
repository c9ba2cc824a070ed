import { accessSync, constants, mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

/** A better-sqlite3 handle. */
export type Db = Database.Database;

/** Error codes (fs and SQLite) meaning the data directory cannot be made or written. */
const UNWRITABLE = new Set([
  'EACCES',
  'EPERM',
  'EROFS',
  'ENOTDIR',
  'EEXIST',
  'SQLITE_CANTOPEN',
  'SQLITE_READONLY',
]);

/** Creates the data directory `dir` if needed; one that cannot be written is refused naming it and TOOLSHIFT_DATA_DIR. */
export function writableDataDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw unwritable(dir, err);
  }
}

function unwritable(dir: string, err: unknown): unknown {
  const code = String((err as NodeJS.ErrnoException).code);
  if (!UNWRITABLE.has(code)) return err;
  return new Error(
    `Cannot write the data directory ${dir} (${code}): make it writable, or set ` +
      'TOOLSHIFT_DATA_DIR to a directory toolshift may write.',
  );
}

/**
 * Opens (and creates) a SQLite file with WAL and a busy timeout, so several processes can share it. A data
 * directory that cannot be created or written is refused naming the path and TOOLSHIFT_DATA_DIR.
 */
export function openDatabase(file: string): Db {
  if (file !== ':memory:') writableDataDir(path.dirname(file));
  let db: Db;
  try {
    db = new Database(file);
  } catch (err) {
    throw unwritable(path.dirname(file), err);
  }
  // exec, not db.pragma(): pragma() prepares a throwaway statement, and on Node 24 better-sqlite3 12 aborts
  // the process when V8 collects a statement outside a JS context. Stores prepare theirs once and keep them.
  // synchronous = NORMAL, SQLite's advice for WAL: a commit no longer waits for an fsync (250 µs each here,
  // and a step commits five or six rows); a crash of the process loses nothing, the database never corrupts,
  // and only a power cut can roll back the last commits before the next checkpoint.
  db.exec(
    'PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;',
  );
  return db;
}

/**
 * Applies `component`'s migrations not applied yet, in order (step N is `migrations[N - 1]`), each in a
 * transaction that records it in `schema_migrations` (the same scheme as lib/db/postgres.ts). A step may be a
 * function, for a change SQLite cannot say in SQL alone. Returns the versions applied now.
 */
export function migrateSqlite(
  db: Db,
  component: string,
  migrations: readonly (string | ((db: Db) => void))[],
): number[] {
  db.exec(
    `CREATE TABLE IF NOT EXISTS schema_migrations (component TEXT NOT NULL, version INTEGER NOT NULL,
     applied_at TEXT NOT NULL, PRIMARY KEY (component, version))`,
  );
  const seen = db.prepare<[string, number], { version: number }>(
    'SELECT version FROM schema_migrations WHERE component = ? AND version = ?',
  );
  const record = db.prepare(
    'INSERT INTO schema_migrations (component, version, applied_at) VALUES (?, ?, ?)',
  );
  const applied: number[] = [];
  migrations.forEach((step, i) => {
    const version = i + 1;
    db.transaction(() => {
      if (seen.get(component, version)) return;
      if (typeof step === 'string') db.exec(step);
      else step(db);
      record.run(component, version, new Date().toISOString());
      applied.push(version);
    }).immediate();
  });
  return applied;
}

/**
 * How long a queued write may wait for others to share its commit. Short enough that nothing a person or a
 * client does notices (every read of the store commits first), long enough that a step's rows, the audit row
 * of its tool call and the next step's rows usually share one commit instead of costing one each, and that
 * the commit happens after the answer has gone out rather than in its way.
 */
export const GROUP_COMMIT_MS = 5;

/** Writes queued for one transaction, committed together a few milliseconds later. */
export interface WriteBatch {
  /** Queues a write (a prepared statement's run, say); committed with the others queued meanwhile. */
  add(write: () => void): void;
  /** Commits what is queued now, before a read that must see it; a failure goes to `onError`. */
  flush(): void;
}

/** A row the database refused (a constraint): the other rows of its batch are fine on their own. */
const isRowError = (err: unknown) => String((err as { code?: unknown }).code).startsWith('SQLITE_CONSTRAINT');

/**
 * Groups a store's writes into one transaction every GROUP_COMMIT_MS (or per `maxWrites`): under WAL a
 * commit costs far more than a row (the WAL frames of every page it touched and the commit record, written
 * with one writev each), and a model step records five or six rows. A row the database refuses (a constraint)
 * is left out and reported to `onError`, the others retried on their own; any other failure (the database
 * busy past its timeout, a full disk, an I/O error, a closed handle) loses the batch and is reported once —
 * retrying row by row would only wait out the same lock again. What a crash of the process can lose is the last
 * few milliseconds not yet committed; reads of the store flush first, so the store itself never sees a write
 * missing.
 */
export function createWriteBatch(
  db: Db,
  onError: (err: unknown) => void,
  opts: { maxWrites?: number; delayMs?: number; onBegin?: () => void } = {},
): WriteBatch {
  const { maxWrites = 500, delayMs = GROUP_COMMIT_MS, onBegin } = opts;
  let queue: (() => void)[] = [];
  let scheduled: NodeJS.Timeout | null = null;
  const transaction = db.transaction((writes: (() => void)[]) => {
    onBegin?.();
    for (const write of writes) write();
  });
  function flush() {
    if (scheduled) clearTimeout(scheduled);
    scheduled = null;
    if (queue.length === 0) return;
    const writes = queue;
    queue = [];
    try {
      transaction(writes);
      return;
    } catch (err) {
      if (!isRowError(err)) return onError(err);
    }
    for (const write of writes) {
      try {
        write();
      } catch (err) {
        onError(err);
        if (!isRowError(err)) return;
      }
    }
  }
  return {
    add(write) {
      queue.push(write);
      if (queue.length >= maxWrites) flush();
      else scheduled ??= setTimeout(flush, delayMs);
    },
    flush,
  };
}
