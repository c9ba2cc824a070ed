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

/**
 * Opens (and creates) a SQLite file with WAL and a busy timeout, so several processes can share it. A data
 * directory that cannot be created or written is refused naming the path and TOOLSHIFT_DATA_DIR.
 */
export function openDatabase(file: string): Db {
  let db: Db;
  try {
    if (file !== ':memory:') {
      mkdirSync(path.dirname(file), { recursive: true });
      accessSync(path.dirname(file), constants.W_OK);
    }
    db = new Database(file);
  } catch (err) {
    const code = String((err as NodeJS.ErrnoException).code);
    if (!UNWRITABLE.has(code)) throw err;
    throw new Error(
      `Cannot write the data directory ${path.dirname(file)} (${code}): make it writable, or set ` +
        'TOOLSHIFT_DATA_DIR to a directory toolshift may write.',
    );
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
