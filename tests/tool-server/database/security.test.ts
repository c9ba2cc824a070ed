import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { ToolError } from '../../../tool-server/kit/errors.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import {
  assertReadOnlyProgram,
  assertReadStatement,
  SqlRefused,
} from '../../../tool-server/tools/database/guard.ts';
import { openReadOnly } from '../../../tool-server/tools/database/open.ts';
import { createDbRunner, type DbRunner } from '../../../tool-server/tools/database/runner.ts';
import { type DatabaseToolContext, databaseTools } from '../../../tool-server/tools/database/tools.ts';
import { fileSystemTools } from '../../../tool-server/tools/files/tools.ts';
import { isAlive } from '../../helpers/processes.ts';

// The attacks on database_tools, each shown failing by its effect: the call is refused with a clear error
// and the database file is byte-for-byte what it was, with no file created beside it or elsewhere. Where a
// defence is one of several layers (tool-server/tools/database/guard.ts), the layer is also shown alone, and where the attack works
// on a plain read-only connection, that is shown first, so a test could not pass with the defence missing.

let base: string;
let root: string;
let outside: string;
let db: string;
let secret: string;
let runner: DbRunner;
let ctx: DatabaseToolContext;

/** A real loadable extension, built with better-sqlite3 from source (absent with a prebuilt binary). */
const EXTENSION = path.join(
  path.dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')),
  'build/Release/test_extension.node',
);

function makeDb(file: string, sql: string): void {
  const conn = new Database(file);
  try {
    conn.exec(sql);
  } finally {
    conn.close();
  }
}

/** What must not change: the database's bytes and the names in both directories. */
function snapshot() {
  return {
    hash: createHash('sha256').update(readFileSync(db)).digest('hex'),
    root: readdirSync(root).sort(),
    outside: readdirSync(outside).sort(),
  };
}

async function refused(sql: string, message: RegExp, params?: unknown): Promise<void> {
  const before = snapshot();
  const tool = databaseTools.find((t) => t.name === 'query');
  const err = await tool?.run({ path: 'app.db', sql, ...(params ? { params } : {}) }, ctx).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, sql).toBeInstanceOf(ToolError);
  expect((err as Error).message, sql).toMatch(message);
  expect(snapshot(), sql).toEqual(before);
}

async function query(sql: string, context: DatabaseToolContext = ctx): Promise<any> {
  return databaseTools.find((t) => t.name === 'query')?.run({ path: 'app.db', sql }, context);
}

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'db-security-')));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  await mkdir(root, { recursive: true });
  await mkdir(outside, { recursive: true });
  db = path.join(root, 'app.db');
  secret = path.join(outside, 'secret.db');
  makeDb(
    db,
    `CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
     INSERT INTO users (name) VALUES ('ann'), ('bob');
     CREATE VIEW sneaky AS SELECT load_extension('${EXTENSION}') AS x;`,
  );
  makeDb(secret, "CREATE TABLE s (v TEXT); INSERT INTO s VALUES ('the secret')");
  await writeFile(path.join(root, 'notes.txt'), 'hello\n');
  const paths = await PathGuard.create({ roots: [root], readOnlyRoots: [] });
  runner = createDbRunner({ maxIdle: 3 });
  ctx = { paths, maxReadBytes: 4096, databases: { runner, timeoutMs: 15_000 } };
});

afterAll(async () => {
  runner.close();
  await rm(base, { recursive: true, force: true });
});

describe('writes', () => {
  it('refuses every kind of write, also one hidden behind WITH, and the rows stay', async () => {
    const stop = /Only read statements run here/;
    await refused("INSERT INTO users (name) VALUES ('eve')", stop);
    await refused("UPDATE users SET name = 'eve'", stop);
    await refused('DELETE FROM users', stop);
    await refused("REPLACE INTO users VALUES (1, 'eve')", stop);
    await refused("INSERT INTO users (name) VALUES ('eve') RETURNING id", stop);
    await refused('CREATE TABLE t (x)', stop);
    await refused('DROP TABLE users', stop);
    await refused('ALTER TABLE users ADD COLUMN x', stop);
    await refused('BEGIN IMMEDIATE', stop);
    await refused('REINDEX', stop);
    await refused('ANALYZE', stop);
    // Past the statement gate: SQLite itself reports the compiled program as not read-only.
    await refused('WITH x AS (SELECT 1) DELETE FROM users', /would change the database/);
    await refused(
      "WITH x AS (SELECT 1) INSERT INTO users (name) SELECT 'eve' FROM x",
      /would change the database/,
    );
    expect((await query('SELECT name FROM users ORDER BY id')).rows).toEqual([['ann'], ['bob']]);
  });

  it('the connection itself refuses writes, whatever the checks before it', () => {
    const conn = openReadOnly(db, 1000);
    try {
      expect(() => conn.prepare('DELETE FROM users').run()).toThrow(/readonly database/);
    } finally {
      conn.close();
    }
  });
});

describe('ATTACH and DETACH', () => {
  it('works on a plain read-only connection: the attack is real', () => {
    const plain = new Database(db, { readonly: true });
    try {
      plain.prepare(`ATTACH '${secret}' AS s`).run();
      expect(plain.prepare('SELECT v FROM s.s').pluck().get()).toBe('the secret');
    } finally {
      plain.close();
    }
  });

  it('is refused through the tool in every spelling, and the outside file stays unread', async () => {
    await refused(`ATTACH '${secret}' AS s`, /starts with ATTACH/);
    await refused(`attach database '${secret}' as s`, /starts with ATTACH/);
    await refused('/* hi */ ATTACH ? AS s', /starts with ATTACH/, [secret]);
    await refused('DETACH main', /starts with DETACH/);
    await refused('SELECT v FROM s.s', /SQL error: no such table: s.s/);
  });

  it('is refused by SQLite-level checks alone, with the statement gate out of the way', () => {
    const conn = openReadOnly(db, 1000);
    try {
      const program = (sql: string) =>
        assertReadOnlyProgram(conn, conn.prepare(sql), sql, { keyword: 'SELECT', explain: false });
      expect(() => program(`ATTACH '${secret}' AS s`)).toThrow(/ATTACH is refused/);
      expect(() => program('DETACH s')).toThrow(/DETACH is refused/);
      // Without the opcode check it would still be refused: SQLite says ATTACH returns no rows.
      const attach = conn.prepare(`ATTACH '${secret}' AS s`);
      expect(attach.readonly).toBe(true); // why stmt.readonly alone is not enough
      expect(attach.reader).toBe(false);
    } finally {
      conn.close();
    }
  });
});

describe('several statements at once', () => {
  it('runs only single statements, so nothing rides along after a read', async () => {
    await refused('SELECT 1; DELETE FROM users', /Only one statement per call/);
    await refused(`SELECT 1; ATTACH '${secret}' AS s`, /Only one statement per call/);
    await refused('SELECT 1;;SELECT 2', /Only one statement per call/);
    // A trailing semicolon or comment is one statement.
    expect((await query('SELECT count(*) FROM users; -- done')).rows).toEqual([[2]]);
  });
});

describe('VACUUM INTO', () => {
  it('writes a copy even from a plain read-only connection: the attack is real', () => {
    const plain = new Database(db, { readonly: true });
    const copy = path.join(outside, 'proof.db');
    try {
      plain.prepare(`VACUUM INTO '${copy}'`).run();
      expect(existsSync(copy)).toBe(true);
    } finally {
      plain.close();
    }
    return rm(copy);
  });

  it('is refused through the tool, and no copy appears inside or outside the roots', async () => {
    await refused(`VACUUM INTO '${path.join(outside, 'copy.db')}'`, /starts with VACUUM/);
    await refused(`VACUUM INTO '${path.join(root, 'copy.db')}'`, /starts with VACUUM/);
    await refused('VACUUM', /starts with VACUUM/);
  });

  it('is refused by SQLite-level checks alone; the connection alone would leave a file behind', () => {
    const target = path.join(outside, 'layer.db');
    const conn = openReadOnly(db, 1000);
    try {
      const sql = `VACUUM INTO '${target}'`;
      const stmt = conn.prepare(sql);
      expect(stmt.readonly).toBe(false);
      expect(() => assertReadOnlyProgram(conn, stmt, sql, { keyword: 'SELECT', explain: false })).toThrow(
        /VACUUM is refused/,
      );
      // query_only makes it fail too, but only after SQLite created the (empty) target file: the checks before
      // running it are what keep the file system untouched.
      expect(() => stmt.run()).toThrow(/readonly database/);
      expect(statSync(target).size).toBe(0);
    } finally {
      conn.close();
    }
    return rm(target);
  });
});

describe('load_extension', () => {
  it.skipIf(!existsSync(EXTENSION))('the extension is a real one: a plain connection can load it', () => {
    const plain = new Database(':memory:');
    try {
      plain.loadExtension(EXTENSION);
      expect(plain.prepare('SELECT testExtensionFunction(1, 2)').pluck().get()).toBe(2);
    } finally {
      plain.close();
    }
  });

  it('is refused in a query and through a view in the file, and nothing was loaded', async () => {
    await refused(`SELECT load_extension('${EXTENSION}')`, /load_extension\(\) is refused/);
    await refused('SELECT load_extension(?)', /load_extension\(\) is refused/, [EXTENSION]);
    await refused(
      `SELECT load_extension('${EXTENSION}', 'sqlite3_extension_init')`,
      /load_extension\(\) is refused/,
    );
    await refused('SELECT * FROM sneaky', /unsafe use of load_extension/);
    await refused('SELECT testExtensionFunction(1)', /no such function: testExtensionFunction/);
  });

  it('stays disabled in SQLite itself, with the opcode check out of the way', () => {
    const conn = openReadOnly(db, 1000);
    try {
      expect(() => conn.prepare('SELECT load_extension(?)').get(EXTENSION)).toThrow(/not authorized/);
    } finally {
      conn.close();
    }
  });
});

describe('pragmas', () => {
  it('are refused before SQLite compiles them, in every spelling', async () => {
    const why = /PRAGMA statements are refused because some take effect while being compiled/;
    await refused('PRAGMA writable_schema=ON', why);
    await refused('pragma WRITABLE_SCHEMA = 1', why);
    await refused('/* x */ -- y\n PRAGMA main.writable_schema=ON', why);
    await refused('EXPLAIN PRAGMA writable_schema=ON', why);
    await refused('EXPLAIN QUERY PLAN PRAGMA writable_schema=ON', why);
    await refused(`PRAGMA temp_store_directory = '${outside}'`, why);
    await refused('PRAGMA trusted_schema=ON', why);
    await refused('PRAGMA query_only=OFF', why);
    await refused('PRAGMA journal_mode=DELETE', why);
    await refused('PRAGMA table_info(users)', /pragma_table_info\('t'\)/);
  });

  it('must be stopped before prepare(): preparing one, never run, already acts', () => {
    const conn = new Database(db, { readonly: true });
    try {
      expect(conn.pragma('cache_size', { simple: true })).not.toBe(77);
      conn.prepare('PRAGMA cache_size = 77');
      expect(conn.pragma('cache_size', { simple: true })).toBe(77);
      expect(() => assertReadStatement('PRAGMA cache_size = 77')).toThrow(SqlRefused);
    } finally {
      conn.close();
    }
  });

  it('writable_schema stays off on the connection even if set (defensive mode)', () => {
    const conn = openReadOnly(db, 1000);
    try {
      conn.prepare('PRAGMA writable_schema = ON').run();
      expect(conn.pragma('writable_schema', { simple: true })).toBe(0);
    } finally {
      conn.close();
    }
  });

  it('can be read through their table-valued functions', async () => {
    expect((await query('SELECT * FROM pragma_writable_schema')).rows).toEqual([[0]]);
    expect((await query('SELECT name FROM pragma_table_info(?)'.replace('?', "'users'"))).rows).toEqual([
      ['id'],
      ['name'],
    ]);
  });
});

describe('a query that never ends', () => {
  const RUNAWAY = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c';

  it('is stopped at the deadline while other calls are answered; its process is killed', async () => {
    const registry = createRegistry([...fileSystemTools, ...databaseTools]);
    // Warm three processes, so the calls made meanwhile need not start one.
    await Promise.all([1, 2, 3].map(() => query('SELECT 1')));
    const before = snapshot();
    const short = { ...ctx, databases: { ...ctx.databases, timeoutMs: 2000 } };
    let finished = false;
    const runaway = registry.call('query', { path: 'app.db', sql: RUNAWAY }, short).finally(() => {
      finished = true;
    });
    const others = await Promise.all([
      registry.call('query', { path: 'app.db', sql: 'SELECT count(*) FROM users' }, ctx),
      registry.call('list_tables', { path: 'app.db' }, ctx),
      registry.call('list_databases', {}, ctx),
      registry.call('read_text_file', { path: 'notes.txt' }, ctx),
    ]);
    const during = runner.pids();
    expect(finished).toBe(false);
    expect(others.map((r) => r.success)).toEqual([true, true, true, true]);
    expect((others[0].result as { rows: unknown }).rows).toEqual([[2]]);

    const result = await runaway;
    expect(result.success).toBe(false);
    expect(result.error).toMatch(
      /The query ran longer than 2000 ms and was stopped \(its process was killed/,
    );
    const dead = during.filter((pid) => !isAlive(pid));
    expect(dead).toHaveLength(1);
    expect(runner.pids()).not.toContain(dead[0]);
    expect(snapshot()).toEqual(before);
    // The pool goes on: a fresh process answers the next query.
    expect((await query('SELECT count(*) FROM users')).rows).toEqual([[2]]);
  });

  it('is stopped also when it never yields a row, and an endless stream stops at max_rows', async () => {
    const short = { ...ctx, databases: { ...ctx.databases, timeoutMs: 1000 } };
    const never =
      'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c WHERE x < 0';
    await expect(query(never, short)).rejects.toThrow(/ran longer than 1000 ms and was stopped/);
    const stream = await query(
      'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c',
    );
    expect(stream.row_count).toBe(100);
    expect(stream.truncated).toBe(true);
  });

  it('reports a query process that dies, and the next call gets a new one', async () => {
    const lone = createDbRunner({ maxProcesses: 1, maxIdle: 1 });
    let handed = 0;
    // The pool as given, counting the queries handed to it (the one process takes each at once).
    const counted: DbRunner = {
      ...lone,
      run: (...args) => {
        handed++;
        return lone.run(...args);
      },
    };
    const own = { ...ctx, databases: { ...ctx.databases, runner: counted } };
    try {
      await query('SELECT 1', own);
      const [pid] = lone.pids();
      const pending = query(RUNAWAY, own);
      // Killed while its process has the runaway query.
      await expect.poll(() => handed).toBe(2);
      process.kill(pid, 'SIGKILL');
      await expect(pending).rejects.toThrow(/The database process stopped unexpectedly \(SIGKILL\)/);
      expect((await query('SELECT count(*) FROM users', own)).rows).toEqual([[2]]);
      expect(lone.pids()).not.toContain(pid);
    } finally {
      lone.close();
    }
  });
});

describe('the file that is opened', () => {
  it.skipIf(!existsSync('/proc/self/fd'))('must be the very file that was checked', () => {
    const info = statSync(db);
    openReadOnly(db, 1000, { dev: info.dev, ino: info.ino }).close();
    expect(() => openReadOnly(db, 1000, { dev: info.dev, ino: info.ino + 1 })).toThrow(
      /changed while it was being opened/,
    );
  });

  it('a WAL database is read without creating -wal or -shm files, and a live one sees committed rows', async () => {
    const wal = path.join(root, 'wal.db');
    makeDb(wal, "PRAGMA journal_mode = WAL; CREATE TABLE t (v); INSERT INTO t VALUES ('checkpointed')");
    const files = readdirSync(root).sort();
    const hash = createHash('sha256').update(readFileSync(wal)).digest('hex');
    const read = (sql: string) =>
      databaseTools.find((t) => t.name === 'query')?.run({ path: 'wal.db', sql }, ctx);
    expect(((await read('SELECT v FROM t')) as { rows: unknown }).rows).toEqual([['checkpointed']]);
    expect(readdirSync(root).sort()).toEqual(files);
    expect(createHash('sha256').update(readFileSync(wal)).digest('hex')).toBe(hash);

    const writer = new Database(wal);
    try {
      writer.pragma('wal_autocheckpoint = 0');
      writer.prepare("INSERT INTO t VALUES ('in the wal')").run();
      const rows = ((await read('SELECT v FROM t ORDER BY rowid')) as { rows: unknown }).rows;
      expect(rows).toEqual([['checkpointed'], ['in the wal']]);
    } finally {
      writer.close();
    }
  });
});

describe('statement gate', () => {
  it('lets reads through and refuses what it does not recognise', () => {
    expect(assertReadStatement('  select 1').keyword).toBe('SELECT');
    expect(assertReadStatement('WITH a AS (SELECT 1) SELECT * FROM a').keyword).toBe('WITH');
    expect(assertReadStatement('VALUES (1)').keyword).toBe('VALUES');
    expect(assertReadStatement('explain query plan select 1')).toEqual({ keyword: 'EXPLAIN', explain: true });
    for (const sql of [
      '(SELECT 1)',
      '\vSELECT 1',
      'EXPLAIN QUERY SELECT 1',
      '',
      ';SELECT 1',
      'SAVEPOINT a',
    ]) {
      expect(() => assertReadStatement(sql), JSON.stringify(sql)).toThrow(SqlRefused);
    }
  });
});
