import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

/** A better-sqlite3 handle. */
export type Db = Database.Database;

/** Opens (and creates) a SQLite file with WAL and a busy timeout, so several processes can share it. */
export function openDatabase(file: string): Db {
  if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  // exec, not db.pragma(): pragma() prepares a throwaway statement, and on Node 24 better-sqlite3 12 aborts
  // the process when V8 collects a statement outside a JS context. Stores prepare theirs once and keep them.
  db.exec('PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;');
  return db;
}
