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
 * How long a queued write may wait for others to share its commit (the task store's events,
 * agent-server/store/writes.ts). Short enough that nothing a person or a client does notices (a read of a task
 * commits its writes first), long enough that a step's rows and the next step's usually share one commit
 * instead of costing one each, and that the commit happens after the answer has gone out rather than in its way.
 */
export const GROUP_COMMIT_MS = 5;
