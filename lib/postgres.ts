import pg from 'pg';

// PostgreSQL, when DATABASE_URL names one: a bounded connection pool, and the versioned schema migrations each
// store applies at start (the same scheme as lib/sqlite.ts migrate(): numbered steps in `schema_migrations`,
// per component, each applied once in its own transaction). Every statement has a time limit, so a stuck
// server is an error the caller sees rather than a request that never ends.

export type Pool = pg.Pool;

/** How long one statement may run before the server cancels it. */
const STATEMENT_TIMEOUT_MS = 30_000;

/** A pool on `url`, for one service (`application_name` says which in pg_stat_activity). */
export function openPostgres(url: string, service: string, opts: { max?: number } = {}): Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    application_name: `toolshift ${service}`,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    // A connection a firewall dropped silently (the listening one above all) is noticed.
    keepAlive: true,
    statement_timeout: STATEMENT_TIMEOUT_MS,
  });
  // An idle client's connection dropping (the server restarting) is reported on the pool; the next query
  // gets a fresh connection. Without a listener it would be an uncaught error.
  pool.on('error', () => {});
  return pool;
}

/** Runs `work` in a transaction on one connection: committed when it returns, rolled back when it throws. */
export async function inTransaction<T>(pool: Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/**
 * Applies `component`'s migrations not applied yet, in order (step N is `migrations[N - 1]`), each in a
 * transaction that records it; several processes starting at once wait for each other (an advisory lock).
 * Returns the versions applied now.
 */
export async function migratePostgres(
  pool: Pool,
  component: string,
  migrations: readonly string[],
): Promise<number[]> {
  try {
    return await migrate(pool, component, migrations);
  } catch (err) {
    // The address is not repeated: DATABASE_URL may carry a password.
    throw new Error(
      `${component} cannot use its PostgreSQL database (DATABASE_URL): ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
}

async function migrate(pool: Pool, component: string, migrations: readonly string[]): Promise<number[]> {
  await pool.query(
    `CREATE TABLE IF NOT EXISTS schema_migrations (
       component TEXT NOT NULL, version INTEGER NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
       PRIMARY KEY (component, version))`,
  );
  const applied: number[] = [];
  for (let version = 1; version <= migrations.length; version++) {
    const done = await inTransaction(pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`toolshift:${component}`]);
      const seen = await client.query(
        'SELECT 1 FROM schema_migrations WHERE component = $1 AND version = $2',
        [component, version],
      );
      if (seen.rowCount) return false;
      await client.query(migrations[version - 1]);
      await client.query('INSERT INTO schema_migrations (component, version) VALUES ($1, $2)', [
        component,
        version,
      ]);
      return true;
    });
    if (done) applied.push(version);
  }
  return applied;
}

/**
 * Listens on `channels` with one connection of `pool`, held for as long as it listens; `onNotify` gets each
 * notification. A lost connection is replaced after `retryMs` (what was sent meanwhile is lost: listeners
 * keep polling as the backstop); `onListen` is called each time listening (re)starts. Returns the stop.
 */
export function listenPostgres(
  pool: Pool,
  channels: readonly string[],
  onNotify: (channel: string, payload: string) => void,
  opts: { retryMs?: number; onListen?: () => void } = {},
): () => Promise<void> {
  const retryMs = opts.retryMs ?? 1000;
  /** The listening connection, and how to give it back (once). */
  let client: { c: pg.PoolClient; free: (err?: Error) => void } | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  /** Connects again after `retryMs` (once, however many ways the connection failed). */
  const retry = () => {
    if (stopped || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, retryMs);
  };
  const connect = async () => {
    if (stopped) return;
    let free: ((err?: Error) => void) | undefined;
    try {
      const c = await pool.connect();
      let released = false;
      free = (err?: Error) => {
        if (released) return;
        released = true;
        if (client?.c === c) client = undefined;
        c.release(err);
      };
      const release = free;
      c.on('notification', (n) => onNotify(n.channel, n.payload ?? ''));
      c.on('error', (err) => {
        release(err);
        retry();
      });
      for (const channel of channels) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      if (stopped) return release();
      client = { c, free: release };
      opts.onListen?.();
    } catch (err) {
      // A connection that could not listen goes back broken (the pool drops it), and listening starts over.
      free?.(err as Error);
      retry();
    }
  };
  void connect();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    const current = client;
    if (!current) return;
    await current.c.query('UNLISTEN *').catch(() => {});
    current.free();
  };
}
