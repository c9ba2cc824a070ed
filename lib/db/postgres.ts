import pg from 'pg';
import { createReachability, type Reachability } from './reachability.ts';

// PostgreSQL, when DATABASE_URL names one: a bounded connection pool (the stores run on it through Kysely,
// lib/db/kysely.ts, which applies their migrations), and LISTEN on it. Every statement has a time limit, so a
// stuck server is an error the caller sees rather than a request that never ends.

export type Pool = pg.Pool;

/** How often an unreachable server is asked whether it is back. */
const PROBE_MS = 1000;

/** How long one statement may run before the server cancels it. */
const STATEMENT_TIMEOUT_MS = 30_000;

/** The reachability of each pool's server (lib/db/reachability.ts), as its statements found it. */
const reachabilities = new WeakMap<Pool, Reachability>();

/** Whether `pool`'s server could be reached at its last statement (tracked by its users: `reach.track`). */
export function reachabilityOf(pool: Pool): Reachability {
  let reach = reachabilities.get(pool);
  if (!reach) {
    reach = createReachability('PostgreSQL, DATABASE_URL');
    reachabilities.set(pool, reach);
  }
  return reach;
}

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
  const reach = reachabilityOf(pool);
  pool.on('error', (err) => reach.down(err));
  // A lent-out connection has no listener of the pool's: the server going away between two of its statements
  // would be an uncaught 'error' event (the process's end). Each connection has one of its own, for good; the
  // statement in flight fails by itself, and the next one on that connection too.
  pool.on('connect', (client) => {
    client.on('error', (err) => reach.down(err));
  });
  // Down, the server is asked every second whether it is back: /health and the requests refused meanwhile
  // (which do not try it themselves) learn it at once, also in a process that has nothing to write.
  let probe: NodeJS.Timeout | undefined;
  reach.onDown(() => {
    probe ??= setInterval(() => {
      // A pool closed (its service stopping) is asked nothing more.
      if (pool.ending) return clearInterval(probe);
      // Its failure is noted by `track` (still down); there is nothing else to do with it.
      reach.track(() => pool.query('SELECT 1')).catch(() => {});
    }, PROBE_MS);
    probe.unref();
  });
  reach.onUp(() => {
    clearInterval(probe);
    probe = undefined;
  });
  return pool;
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
      listen();
    }, retryMs);
  };
  /** Connects and listens; never rejects (a failure retries). */
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
  const listen = () => {
    connect().catch(retry);
  };
  listen();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    const current = client;
    if (!current) return;
    await current.c.query('UNLISTEN *').catch(() => {});
    current.free();
  };
}
