import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWriteBatch, type Db, GROUP_COMMIT_MS, openDatabase } from '../../lib/db/sqlite.ts';

// Writes committed together a few milliseconds after they are queued (lib/db/sqlite.ts): what another reader of the file sees, and that a
// write that fails never takes the rest of its batch with it.

let dir: string;
let db: Db;
let reader: Database.Database;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'toolshift-batch-'));
  db = openDatabase(path.join(dir, 'x.db'));
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
  reader = new Database(path.join(dir, 'x.db'), { readonly: true });
});
afterEach(async () => {
  reader.close();
  db.close();
  await rm(dir, { recursive: true, force: true });
});

const rows = () =>
  (reader.prepare('SELECT id, v FROM t ORDER BY id').all() as { id: number; v: string }[]).map((r) => r.v);

describe('write batch', () => {
  it('commits queued writes together a few milliseconds later, or at once when flushed', async () => {
    const batch = createWriteBatch(db, (err) => {
      throw err;
    });
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    batch.add(() => insert.run('a'));
    batch.add(() => insert.run('b'));
    expect(rows()).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(rows()).toEqual([]);
    await new Promise((r) => setTimeout(r, GROUP_COMMIT_MS + 20));
    expect(rows()).toEqual(['a', 'b']);
    batch.add(() => insert.run('c'));
    batch.flush();
    expect(rows()).toEqual(['a', 'b', 'c']);
  });

  it('retries the others alone when one write fails, and reports the failure', async () => {
    const errors: unknown[] = [];
    const batch = createWriteBatch(db, (err) => errors.push(err));
    const insert = db.prepare('INSERT INTO t (id, v) VALUES (?, ?)');
    batch.add(() => insert.run(1, 'first'));
    batch.add(() => insert.run(1, 'same id again'));
    batch.add(() => insert.run(2, 'after it'));
    batch.flush();
    expect(rows()).toEqual(['first', 'after it']);
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/UNIQUE constraint failed: t\.id/);
  });

  it('loses the batch and says so once when the database stays locked, without waiting again row by row', () => {
    const errors: unknown[] = [];
    const batch = createWriteBatch(db, (err) => errors.push(err));
    db.exec('PRAGMA busy_timeout = 50');
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    const other = new Database(path.join(dir, 'x.db'));
    other.exec('BEGIN IMMEDIATE');
    try {
      for (const v of ['1', '2', '3', '4', '5']) batch.add(() => insert.run(v));
      batch.flush();
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    // Reported once for the batch: no row-by-row retry that would wait out the lock five more times.
    expect(errors).toHaveLength(1);
    expect(String((errors[0] as { code?: string }).code)).toMatch(/^SQLITE_BUSY/);
    expect(rows()).toEqual([]);
    // The batch after it commits as usual.
    batch.add(() => insert.run('after'));
    batch.flush();
    expect(rows()).toEqual(['after']);
  });

  it('commits at once when a turn queues more than its limit', () => {
    const batch = createWriteBatch(db, () => {}, { maxWrites: 3 });
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    for (const v of ['1', '2', '3', '4']) batch.add(() => insert.run(v));
    expect(rows()).toEqual(['1', '2', '3']);
    batch.flush();
    expect(rows()).toEqual(['1', '2', '3', '4']);
  });
});
