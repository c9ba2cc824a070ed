import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { ToolError } from '../../../tool-server/kit/errors.ts';
import { createDbRunner, type DbRunner } from '../../../tool-server/tools/database/runner.ts';
import { type DatabaseToolContext, databaseTools } from '../../../tool-server/tools/database/tools.ts';

// database_tools' normal results and error paths, on real SQLite files in a temporary root. The query
// processes are real (tool-server/tools/database/worker.ts); one pool serves the whole file.

let base: string;
let root: string;
let readOnlyRoot: string;
let outside: string;
let runner: DbRunner;
let ctx: DatabaseToolContext;

function makeDb(file: string, sql: string): void {
  const db = new Database(file);
  try {
    db.exec(sql);
  } finally {
    db.close();
  }
}

const SHOP = `
  CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE, vip INTEGER DEFAULT 0);
  CREATE TABLE orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    customer_id INTEGER NOT NULL REFERENCES customers(id) ON DELETE CASCADE,
    total REAL, note TEXT, big INTEGER, data BLOB
  );
  CREATE INDEX orders_by_customer ON orders(customer_id, total);
  CREATE TABLE order_lines (order_id INTEGER, line INTEGER, sku TEXT, PRIMARY KEY (order_id, line),
    FOREIGN KEY (order_id) REFERENCES orders(id)) WITHOUT ROWID;
  CREATE VIEW vip_customers AS SELECT id, name FROM customers WHERE vip = 1;
  INSERT INTO customers (name, email, vip) VALUES ('Ann', 'ann@example.com', 1), ('Bob', 'bob@example.com', 0),
    ('Cy', NULL, 1);
  INSERT INTO orders (customer_id, total, note, big, data) VALUES
    (1, 9.5, 'first', 9007199254740993, x'00ff10'), (1, 20, NULL, 1, NULL), (2, 3.25, 'late', -2, NULL);
`;

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'db-tools-')));
  root = path.join(base, 'root');
  readOnlyRoot = path.join(base, 'ro');
  outside = path.join(base, 'outside');
  for (const dir of [root, readOnlyRoot, outside, path.join(root, 'sub'), path.join(root, 'node_modules')]) {
    await mkdir(dir, { recursive: true });
  }
  makeDb(path.join(root, 'shop.db'), SHOP);
  makeDb(path.join(root, 'sub', 'cache.bin'), 'CREATE TABLE k (v TEXT)'); // a database by header, not by name
  makeDb(path.join(root, 'node_modules', 'dep.sqlite'), 'CREATE TABLE x (y)');
  makeDb(
    path.join(readOnlyRoot, 'ref.sqlite3'),
    "CREATE TABLE r (v); INSERT INTO r VALUES ('read-only root')",
  );
  makeDb(path.join(outside, 'secret.db'), "CREATE TABLE s (v); INSERT INTO s VALUES ('secret')");
  await writeFile(path.join(root, 'empty.sqlite'), '');
  await writeFile(path.join(root, 'fake.db'), 'this is a text file named like a database, not SQLite\n');
  await symlink(path.join(outside, 'secret.db'), path.join(root, 'link.db'));
  const paths = await PathGuard.create({ roots: [root], readOnlyRoots: [readOnlyRoot] });
  runner = createDbRunner({ maxIdle: 2 });
  ctx = { paths, maxReadBytes: 4096, databases: { runner, timeoutMs: 15_000 } };
});

afterAll(async () => {
  runner.close();
  await rm(base, { recursive: true, force: true });
});

async function run(name: string, args: unknown, context: DatabaseToolContext = ctx): Promise<any> {
  const tool = databaseTools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.run(args, context);
}

async function fails(name: string, args: unknown, message: RegExp, context: DatabaseToolContext = ctx) {
  const err = await run(name, args, context).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  expect((err as Error).message).toMatch(message);
}

describe('the tool set', () => {
  it('has four read-only tools with object schemas', () => {
    expect(databaseTools.map((t) => t.name)).toEqual([
      'list_databases',
      'list_tables',
      'describe_table',
      'query',
    ]);
    for (const tool of databaseTools) {
      expect(tool.annotations.readOnlyHint).toBe(true);
      expect(tool.annotations.destructiveHint).toBe(false);
    }
  });
});

describe('list_databases', () => {
  it('finds SQLite files by header under every root, skipping node_modules and symlinks', async () => {
    const r = await run('list_databases', {});
    const found = r.databases.map((d: { path: string }) => d.path);
    expect(found).toEqual([
      path.join(root, 'empty.sqlite'),
      path.join(root, 'shop.db'),
      path.join(root, 'sub', 'cache.bin'),
      path.join(readOnlyRoot, 'ref.sqlite3'),
    ]);
    expect(r.database_count).toBe(4);
    expect(r.truncated).toBe(false);
    expect(r.databases[0]).toMatchObject({ empty: true, size_bytes: 0 });
    expect(r.databases[1].size_bytes).toBeGreaterThan(0);
    expect(typeof r.databases[1].modified).toBe('string');
  });

  it('searches one directory, caps the list, and refuses a directory outside the roots', async () => {
    const sub = await run('list_databases', { path: 'sub' });
    expect(sub.databases.map((d: { path: string }) => d.path)).toEqual([path.join(root, 'sub', 'cache.bin')]);
    const capped = await run('list_databases', { max_results: 1 });
    expect(capped.database_count).toBe(1);
    expect(capped.truncated).toBe(true);
    await fails('list_databases', { path: outside }, /outside the allowed directories/);
  });
});

describe('list_tables and describe_table', () => {
  it('lists tables and views, system tables only when asked', async () => {
    const r = await run('list_tables', { path: 'shop.db' });
    expect(r.database).toBe(path.join(root, 'shop.db'));
    expect(r.tables).toEqual([
      { name: 'customers', type: 'table', columns: 4 },
      { name: 'order_lines', type: 'table', columns: 3 },
      { name: 'orders', type: 'table', columns: 6 },
      { name: 'vip_customers', type: 'view', columns: 2 },
    ]);
    const all = await run('list_tables', { path: 'shop.db', include_system: true });
    expect(all.tables.map((t: { name: string }) => t.name)).toContain('sqlite_sequence');
  });

  it('describes columns, keys, foreign keys, indexes and the row count', async () => {
    const r = await run('describe_table', { path: 'shop.db', table: 'ORDERS' });
    expect(r.table).toBe('orders');
    expect(r.type).toBe('table');
    expect(r.columns[1]).toEqual({
      name: 'customer_id',
      type: 'INTEGER',
      not_null: true,
      default: null,
      primary_key: false,
    });
    expect(r.primary_key).toEqual(['id']);
    expect(r.foreign_keys).toEqual([
      {
        columns: ['customer_id'],
        references: { table: 'customers', columns: ['id'] },
        on_update: 'NO ACTION',
        on_delete: 'CASCADE',
      },
    ]);
    expect(r.indexes).toEqual([
      {
        name: 'orders_by_customer',
        unique: false,
        origin: 'create index',
        partial: false,
        columns: ['customer_id', 'total'],
      },
    ]);
    expect(r.row_count).toBe(3);
    expect(r.sql).toMatch(/^CREATE TABLE orders/);

    const lines = await run('describe_table', { path: 'shop.db', table: 'order_lines' });
    expect(lines.primary_key).toEqual(['order_id', 'line']);
    expect(lines.without_rowid).toBe(true);
    const customers = await run('describe_table', { path: 'shop.db', table: 'customers' });
    expect(customers.columns.find((c: { name: string }) => c.name === 'vip').default).toBe('0');
    expect(customers.indexes[0]).toMatchObject({
      unique: true,
      origin: 'unique constraint',
      columns: ['email'],
    });
    const view = await run('describe_table', { path: 'shop.db', table: 'vip_customers' });
    expect(view).toMatchObject({ type: 'view', row_count: 2, foreign_keys: [], indexes: [] });
  });

  it('names the tables there are when the table does not exist', async () => {
    await fails(
      'describe_table',
      { path: 'shop.db', table: 'invoices' },
      /No table or view named "invoices"; its tables and views: customers, order_lines, orders, vip_customers/,
    );
  });
});

describe('query', () => {
  it('returns columns, rows as arrays, counts and timing', async () => {
    const r = await run('query', { path: 'shop.db', sql: 'SELECT id, name FROM customers ORDER BY id' });
    expect(r.columns).toEqual([
      { name: 'id', type: 'INTEGER' },
      { name: 'name', type: 'TEXT' },
    ]);
    expect(r.rows).toEqual([
      [1, 'Ann'],
      [2, 'Bob'],
      [3, 'Cy'],
    ]);
    expect(r.row_count).toBe(3);
    expect(r.truncated).toBe(false);
    expect(typeof r.elapsed_ms).toBe('number');
    expect(r.database).toBe(path.join(root, 'shop.db'));
  });

  it('binds positional and named parameters; booleans become 1 and 0', async () => {
    const pos = await run('query', {
      path: 'shop.db',
      sql: 'SELECT name FROM customers WHERE id > ? AND vip = ? ORDER BY id',
      params: [1, true],
    });
    expect(pos.rows).toEqual([['Cy']]);
    const named = await run('query', {
      path: 'shop.db',
      sql: 'SELECT name FROM customers WHERE email = :email OR id = @id ORDER BY id',
      params: { email: 'bob@example.com', '@id': 1 },
    });
    expect(named.rows).toEqual([['Ann'], ['Bob']]);
    // A value that looks like SQL stays a value.
    const injection = await run('query', {
      path: 'shop.db',
      sql: 'SELECT count(*) AS n FROM customers WHERE name = ?',
      params: ["x' OR '1'='1"],
    });
    expect(injection.rows).toEqual([[0]]);
  });

  it('keeps big integers exact, describes blobs, and keeps nulls and reals', async () => {
    const r = await run('query', {
      path: 'shop.db',
      sql: 'SELECT big, data, total, note FROM orders ORDER BY id',
    });
    expect(r.rows[0]).toEqual(['9007199254740993', { blob_bytes: 3, base64: 'AP8Q' }, 9.5, 'first']);
    expect(r.rows[1]).toEqual([1, null, 20, null]);
    expect(r.rows[2]).toEqual([-2, null, 3.25, 'late']);
  });

  it('stops at max_rows and at the byte cap, and cuts long values, saying so', async () => {
    const many =
      'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) SELECT i FROM n';
    const rows = await run('query', { path: 'shop.db', sql: many, max_rows: 10 });
    expect(rows.row_count).toBe(10);
    expect(rows.rows.at(-1)).toEqual([10]);
    expect(rows.truncated).toBe(true);
    expect(rows.note).toMatch(/more rows exist than max_rows \(10\)/);

    const exact = await run('query', { path: 'shop.db', sql: 'SELECT 1 UNION ALL SELECT 2', max_rows: 2 });
    expect(exact.truncated).toBe(false);

    const small = { ...ctx, databases: { ...ctx.databases, maxResultBytes: 1024, maxRows: 50 } };
    const capped = await run('query', { path: 'shop.db', sql: many, max_rows: 5000 }, small);
    expect(capped.row_count).toBe(50); // the service's row cap wins over max_rows
    const wide = await run(
      'query',
      { path: 'shop.db', sql: `SELECT printf('%.100c', 'x') FROM (${many})` },
      small,
    );
    expect(wide.truncated).toBe(true);
    expect(wide.note).toMatch(/1024-byte result cap/);
    expect(JSON.stringify(wide.rows).length).toBeLessThanOrEqual(1024);

    const long = await run('query', { path: 'shop.db', sql: "SELECT printf('%.5000c', 'y') AS s" });
    expect(long.rows[0][0]).toMatch(/^y{4096}… \[cut: 5000 characters in all\]$/);
    expect(long.truncated).toBe(true);
    expect(long.note).toMatch(/substr\(\)/);
  });

  it('runs EXPLAIN QUERY PLAN, VALUES and table-valued pragmas', async () => {
    const plan = await run('query', {
      path: 'shop.db',
      sql: 'EXPLAIN QUERY PLAN SELECT * FROM orders WHERE customer_id = ?',
      params: [1],
    });
    expect(JSON.stringify(plan.rows)).toMatch(/orders_by_customer/);
    const values = await run('query', { path: 'shop.db', sql: "VALUES (1, 'a'), (2, 'b');" });
    expect(values.rows).toEqual([
      [1, 'a'],
      [2, 'b'],
    ]);
    const info = await run('query', {
      path: 'shop.db',
      sql: "SELECT name FROM pragma_table_info('customers')",
    });
    expect(info.rows.map((r: string[]) => r[0])).toEqual(['id', 'name', 'email', 'vip']);
  });

  it('reads an empty database file and one in a read-only root', async () => {
    const empty = await run('query', { path: 'empty.sqlite', sql: 'SELECT count(*) FROM sqlite_schema' });
    expect(empty.rows).toEqual([[0]]);
    const ro = await run('query', { path: path.join(readOnlyRoot, 'ref.sqlite3'), sql: 'SELECT v FROM r' });
    expect(ro.rows).toEqual([['read-only root']]);
  });

  it('works without a pool: a context built by hand gets a process per call', async () => {
    const bare: DatabaseToolContext = { paths: ctx.paths, maxReadBytes: 4096 };
    const r = await run('query', { path: 'shop.db', sql: 'SELECT count(*) FROM orders' }, bare);
    expect(r.rows).toEqual([[3]]);
  });
});

describe('errors the model can act on', () => {
  it('refuses files that are not SQLite databases, directories and paths outside the roots', async () => {
    await fails(
      'query',
      { path: 'fake.db', sql: 'SELECT 1' },
      /is not a SQLite database: it does not start with/,
    );
    await fails('list_tables', { path: 'sub' }, /is a directory, not a database file; list_databases/);
    await fails(
      'query',
      { path: path.join(outside, 'secret.db'), sql: 'SELECT * FROM s' },
      /outside the allowed/,
    );
    await fails('query', { path: 'link.db', sql: 'SELECT * FROM s' }, /outside the allowed/);
    await fails('query', { path: 'missing.db', sql: 'SELECT 1' }, /No such file/);
  });

  it('reports SQL errors and parameter mismatches with what to change', async () => {
    await fails('query', { path: 'shop.db', sql: 'SELEC 1' }, /starts with SELEC/);
    await fails(
      'query',
      { path: 'shop.db', sql: 'SELECT * FROM nowhere' },
      /SQL error: no such table: nowhere/,
    );
    await fails(
      'query',
      { path: 'shop.db', sql: 'SELECT * FROM customers WHERE' },
      /SQL error: incomplete input/,
    );
    await fails(
      'query',
      { path: 'shop.db', sql: 'SELECT * FROM customers WHERE id = ?' },
      /parameters do not fit the statement: Too few parameter values.*array for \? or \?NNN/,
    );
    await fails(
      'query',
      { path: 'shop.db', sql: 'SELECT * FROM customers WHERE id = :id', params: { other: 1 } },
      /parameters do not fit the statement: Missing named parameter "id"/,
    );
    await fails('query', { path: 'shop.db', sql: '  -- only a comment\n' }, /The SQL is empty/);
  });

  it('rejects malformed arguments before any process is asked', async () => {
    await expect(run('query', { path: 'shop.db' })).rejects.toThrow(/Invalid arguments for query: sql/);
    await expect(run('query', { path: 'shop.db', sql: 'SELECT 1', params: [{ a: 1 }] })).rejects.toThrow(
      /Invalid arguments for query: params/,
    );
  });
});
