import type Database from 'better-sqlite3';
import {
  type Compilable,
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  type Kysely as KyselyType,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
  type QueryResult,
  SqliteDialect,
  sql,
} from 'kysely';
import { type Migration, type MigrationProvider, Migrator } from 'kysely/migration';
import type pg from 'pg';
import { type Pool, reachabilityOf } from './postgres.ts';

// One store per service, written once: its statements are built with Kysely, and run on either database —
// SQLite through better-sqlite3 (the embedded default) or PostgreSQL through a pg pool (DATABASE_URL). What
// differs between the two stays behind small named hooks in the store (SKIP LOCKED, LISTEN/NOTIFY); this
// module only opens the one or the other and applies a component's migrations.
//
// SQLite: Kysely runs every statement through one connection, one at a time (its connection mutex), so a
// transaction is never interleaved with another statement of the process. Its driver prepares each statement
// anew; the handle given to it here keeps the prepared statements of the distinct SQL texts it has seen (a
// store's statements are a fixed set, so the cache is bounded by the code, with a cap for safety).

export type DialectName = 'sqlite' | 'postgres';

/** A store's database: its Kysely handle over schema `DB`, and which of the two databases it is. */
export interface StoreDb<DB> {
  db: KyselyType<DB>;
  dialect: DialectName;
  /**
   * SQLite: the handle's statement for `sql` from the same cache Kysely's statements use, and its transaction
   * wrapper, for a hot path that runs a few statements in one turn (while it holds the connection: inside a
   * Kysely transaction or `db.connection()`).
   */
  sqlite?: {
    prepare(sql: string): Database.Statement;
    handle: Database.Database;
    /**
     * Runs synchronous work on the handle in the file's turn: at once when no statement or transaction of this
     * process holds the file (nothing can come between), else once its turn comes.
     */
    inTurn<T>(work: () => T): Promise<T>;
  };
  /** Ends the pool or closes the SQLite handle. */
  close(): Promise<void>;
}

/** At most this many prepared statements kept per SQLite handle; past it the oldest is dropped. */
const PREPARED_CAP = 500;

/** The handle Kysely's SQLite driver gets: better-sqlite3's, preparing each distinct SQL text once. */
function preparedOnce(database: Database.Database) {
  const prepared = new Map<string, Database.Statement>();
  return {
    prepare(sql: string) {
      let stmt = prepared.get(sql);
      if (!stmt) {
        stmt = database.prepare(sql);
        if (prepared.size >= PREPARED_CAP) prepared.delete(prepared.keys().next().value as string);
        prepared.set(sql, stmt);
      }
      return stmt;
    },
    close: () => database.close(),
    /** Which file it is (a database in memory is one of its own). */
    file: database.memory ? `:memory:${Math.random()}` : database.name,
  };
}

/** The turn of each SQLite file among this process's handles on it: the tail of its queue, by file. */
const fileTurns = new Map<string, Promise<void>>();

/**
 * Kysely's SQLite driver, one statement or transaction at a time across every handle of this process on the
 * same file. better-sqlite3 waits for a lock synchronously (the busy timeout): a second handle writing while the
 * first is between two statements of its transaction would hold up the thread, and so the transaction it waits
 * for, until the timeout fails it. Handles on other files, and other processes, go on as before.
 */
class OneTurnPerFile implements Driver {
  readonly #inner: Driver;
  readonly #file: string;
  #release: (() => void) | undefined;
  constructor(inner: Driver, file: string) {
    this.#inner = inner;
    this.#file = file;
  }
  init = () => this.#inner.init();
  async acquireConnection(): Promise<DatabaseConnection> {
    const before = fileTurns.get(this.#file);
    const mine = new Promise<void>((resolve) => {
      this.#release = resolve;
    });
    const tail = (before ?? Promise.resolve()).then(() => mine);
    fileTurns.set(this.#file, tail);
    const release = this.#release as () => void;
    this.#release = () => {
      if (fileTurns.get(this.#file) === tail) fileTurns.delete(this.#file);
      release();
    };
    await before;
    return this.#inner.acquireConnection();
  }
  beginTransaction: Driver['beginTransaction'] = (c, settings) => this.#inner.beginTransaction(c, settings);
  commitTransaction = (c: DatabaseConnection) => this.#inner.commitTransaction(c);
  rollbackTransaction = (c: DatabaseConnection) => this.#inner.rollbackTransaction(c);
  async releaseConnection(c: DatabaseConnection): Promise<void> {
    await this.#inner.releaseConnection(c);
    this.#release?.();
  }
  destroy = () => this.#inner.destroy();
}

/** SQLite's dialect whose driver takes its file's turn (OneTurnPerFile). */
class SqliteFileDialect extends SqliteDialect {
  readonly #file: string;
  constructor(database: ReturnType<typeof preparedOnce>) {
    super({ database });
    this.#file = database.file;
  }
  override createDriver(): Driver {
    return new OneTurnPerFile(super.createDriver(), this.#file);
  }
}

/** Kysely over an open better-sqlite3 handle (lib/db/sqlite.ts openDatabase: WAL, busy timeout). */
export function sqliteDb<DB>(database: Database.Database): StoreDb<DB> {
  const cached = preparedOnce(database);
  const db = new Kysely<DB>({ dialect: new SqliteFileDialect(cached) });
  const inTurn = async <T>(work: () => T): Promise<T> =>
    fileTurns.has(cached.file) ? db.connection().execute(async () => work()) : work();
  return {
    db,
    dialect: 'sqlite',
    sqlite: { prepare: cached.prepare, handle: database, inTurn },
    close: () => db.destroy(),
  };
}

/** Kysely over a pg pool (lib/db/postgres.ts openPostgres: bounded, statement time limit, reachability). */
export function postgresDb<DB>(pool: Pool): StoreDb<DB> {
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', close: () => db.destroy() };
}

/**
 * Kysely over a pg pool whose every statement says whether the server answered (lib/db/postgres.ts
 * reachabilityOf: /health, the pool's probe while it is down): one that cannot reach it rejects with
 * StoreUnavailable (503 and Retry-After to a request), and while the server is down a statement fails at once
 * rather than waiting to connect, until the probe finds it back. A statement's own error (a constraint) is
 * thrown as it is.
 */
export function postgresDbTracked<DB>(pool: Pool): StoreDb<DB> {
  const reach = reachabilityOf(pool);
  const lent = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const tracked: PostgresPool = {
    options: pool.options,
    async connect() {
      if (reach.isDown()) throw reach.unavailable();
      const client = await reach.track(() => pool.connect());
      let wrapped = lent.get(client);
      if (!wrapped) {
        wrapped = {
          query: ((text: string, values: readonly unknown[]) =>
            reach.track(() =>
              client.query(text, values as unknown[]),
            )) as unknown as PostgresPoolClient['query'],
          release: (destroy?: boolean) => client.release(destroy),
        };
        lent.set(client, wrapped);
      }
      return wrapped;
    },
    end: () => pool.end(),
  };
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: tracked }) });
  return {
    db,
    dialect: 'postgres',
    close: async () => {
      await db.destroy();
      reach.forget();
    },
  };
}

/** A statement compiled once: run with its arguments on the store's handle or one of its transactions. */
export type Statement<DB, A, R> = (on: KyselyType<DB>, args: A) => Promise<QueryResult<R>>;

/**
 * Builds a hot statement with Kysely once and compiles it once: `build` gets a marker value for each named
 * argument, and each run binds the real arguments where the markers stand in the compiled parameters. A query built
 * on every call costs more to build and compile than SQLite takes to run it; this one costs neither, and
 * SQLite's handle prepares its one SQL text once.
 */
export function statement<DB, A extends Record<string, unknown>, R>(
  db: KyselyType<DB>,
  names: readonly (keyof A & string)[],
  build: (db: KyselyType<DB>, args: A) => Compilable<R>,
): Statement<DB, A, R> {
  const bind = compiledOnce(db, names, build);
  return (on, args) => on.executeQuery<R>(bind(args));
}

/** `build`'s query compiled once (as statement() does), bound to each call's arguments; not run. */
export function compiledOnce<DB, A extends Record<string, unknown>, R>(
  db: KyselyType<DB>,
  names: readonly (keyof A & string)[],
  build: (db: KyselyType<DB>, args: A) => Compilable<R>,
): (args: A) => CompiledQuery<R> {
  const marks = Object.fromEntries(names.map((n) => [n, `\u0000${n}\u0000`])) as unknown as A;
  const compiled = build(db, marks).compile();
  const slots = compiled.parameters.map((p) => names.find((n) => marks[n] === p));
  for (const n of names) {
    if (!slots.includes(n))
      throw new Error(`statement: argument ${n} is not bound as a value in ${compiled.sql}`);
  }
  const fixed = compiled.parameters;
  return (args) =>
    CompiledQuery.raw(
      compiled.sql,
      slots.map((n, i) => (n === undefined ? fixed[i] : args[n])),
    ) as CompiledQuery<R>;
}

/**
 * Applies `component`'s migrations (named so they sort in order: `001_tasks`, `002_…`) that the database has
 * not had yet, each once, recorded in `<component>_migrations`. Concurrent starts on one PostgreSQL wait for
 * each other (Kysely's migration lock). A failed migration throws, naming it. On PostgreSQL what it did is
 * rolled back; on SQLite the Migrator runs it outside a transaction (Kysely's SQLite adapter declares no
 * transactional DDL), so a migration of several statements there opens its own.
 */
export async function migrate<DB>(
  store: StoreDb<DB>,
  component: string,
  migrations: Record<string, Migration>,
): Promise<void> {
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({
    db: store.db as unknown as KyselyType<unknown>,
    provider,
    migrationTableName: `${component}_migrations`,
    migrationLockTableName: `${component}_migrations_lock`,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`${component}: migration ${failed} failed: ${(error as Error).message ?? error}`, {
      cause: error,
    });
  }
}

/**
 * Runs a migration all or nothing: Kysely's migrator runs SQLite's migrations outside a transaction, so there it
 * is one of its own (PostgreSQL's migrator already runs each in one).
 */
export async function atomically(
  db: KyselyType<unknown>,
  dialect: DialectName,
  work: () => Promise<void>,
): Promise<void> {
  const sqlite = dialect !== 'postgres';
  if (sqlite) await sql`BEGIN IMMEDIATE`.execute(db);
  try {
    await work();
    if (sqlite) await sql`COMMIT`.execute(db);
  } catch (err) {
    if (sqlite) await sql`ROLLBACK`.execute(db).catch(() => undefined);
    throw err;
  }
}

/**
 * `rows` in chunks whose sizes are powers of two up to `max` (64, 64, …, 8, 2, 1): a multi-row statement per
 * chunk, and only a few distinct statements (SQLite prepares each once).
 */
export function* fixedChunks<T>(rows: readonly T[], max = 64): Generator<T[]> {
  let i = 0;
  for (let size = max; size >= 1; size >>= 1) {
    while (rows.length - i >= size) {
      yield rows.slice(i, i + size);
      i += size;
    }
  }
}

/** A database's tables as a migration finds them: each table's columns and their types (lower case). */
export type TablesFound = Map<string, Map<string, string>>;

/** The tables of the store's schema (PostgreSQL's `public`, SQLite's `main`) as they are before a migration. */
export async function tablesFound(db: KyselyType<unknown>): Promise<TablesFound> {
  const tables = await db.introspection.getTables();
  return new Map(
    tables
      .filter((t) => t.schema === undefined || t.schema === 'public' || t.schema === 'main')
      .map((t) => [t.name, new Map(t.columns.map((c) => [c.name, c.dataType.toLowerCase()]))]),
  );
}
