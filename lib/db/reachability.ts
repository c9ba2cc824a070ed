import { HttpError } from '../http/http-error.ts';

// Whether a service's database (PostgreSQL, DATABASE_URL) can be reached, as its last statements found: down
// from the first statement that could not reach it, up again at the first that could. /health says it, what a
// request needs from the database is refused with 503 and Retry-After while it is down, and what a running task
// must write waits for it (agent-server/store/writes.ts).

/** What a client is told to wait before asking again while the database is unreachable. */
export const RETRY_AFTER_S = 5;

/**
 * Whether `err` says the server cannot be reached (rather than refusing a statement): a SQLSTATE of class 08
 * (connection exception) or 57P (the server shutting down or starting up), a socket error (ECONNREFUSED …), or
 * the driver's own word for a connection that ended, timed out or broke. Any other error (a statement refused,
 * a bug) is not: what waits for the database would otherwise wait on it for ever.
 */
export function unreachable(err: unknown): boolean {
  if (err instanceof StoreUnavailable) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code))
    return code.startsWith('08') || code.startsWith('57P');
  if (typeof code === 'string' && /^E[A-Z_]+$/.test(code)) return true;
  return /connect|connection|terminated|timeout|timed out|not queryable|socket/i.test(
    (err as Error | null)?.message ?? '',
  );
}

/** A request that needs the database while it is unreachable: 503, Retry-After, and since when. */
export class StoreUnavailable extends HttpError {
  constructor(database: string, since: number, why: string) {
    const at = new Date(since).toISOString();
    super(
      503,
      `The database (${database}) is unreachable since ${at} (${why}); what needs it waits for it to return: retry in ${RETRY_AFTER_S} s`,
      { code: 'store_unavailable', unreachable_since: at },
      { 'retry-after': String(RETRY_AFTER_S) },
    );
  }
}

/** What /health says of the database: reachable, or since when not and why. */
export type DatabaseHealth = { state: 'ok' } | { state: 'unreachable'; since: string; error: string };

export type Reachability = ReturnType<typeof createReachability>;

/** The databases this process (thread) uses, for /health. */
const databases = new Set<Reachability>();

/** How this process's databases are: the first unreachable one, else ok (also with none). */
export function databaseHealth(): DatabaseHealth {
  for (const d of databases) {
    const h = d.health();
    if (h.state !== 'ok') return h;
  }
  return { state: 'ok' };
}

/** The reachability of `database` (its name in messages, e.g. `PostgreSQL, DATABASE_URL`). */
export function createReachability(database: string) {
  let downSince: number | undefined;
  let why = '';
  /** When it last came back after being down (undefined: never down). */
  let backAt: number | undefined;
  const upListeners = new Set<() => void>();
  const downListeners = new Set<() => void>();
  const r = {
    /** A statement could not reach the server. */
    down(err: unknown) {
      why = (err as Error)?.message ?? String(err);
      if (downSince !== undefined) return;
      downSince = Date.now();
      for (const l of [...downListeners]) l();
    },
    /** A statement reached it. */
    up() {
      if (downSince === undefined) return;
      downSince = undefined;
      backAt = Date.now();
      for (const l of [...upListeners]) l();
    },
    isDown: () => downSince !== undefined,
    /** When it came back from its last outage (undefined: it never went down). */
    backAt: () => backAt,
    /** The error a request gets while the database is down. */
    unavailable: () => new StoreUnavailable(database, downSince ?? Date.now(), why),
    health: (): DatabaseHealth =>
      downSince === undefined
        ? { state: 'ok' }
        : { state: 'unreachable', since: new Date(downSince).toISOString(), error: why },
    /** Runs `work`, noting whether it reached the server; an unreachable one rejects with StoreUnavailable. */
    async track<T>(work: () => Promise<T>): Promise<T> {
      try {
        const result = await work();
        r.up();
        return result;
      } catch (err) {
        if (!unreachable(err)) {
          // The server answered (with an error of the statement's own): it is there.
          r.up();
          throw err;
        }
        r.down(err);
        throw r.unavailable();
      }
    },
    /**
     * `promise`, or StoreUnavailable as soon as the database is down (at once when it is already): a request
     * does not wait for the database to return. `promise` goes on, and its outcome is still observed.
     */
    guard: <T>(promise: Promise<T>): Promise<T> => guarded(r, promise),
    /** Forgets it (its pool closed): /health no longer reports it. */
    forget: () => void databases.delete(r),
    onDown: (listener: () => void) => {
      downListeners.add(listener);
      return () => downListeners.delete(listener);
    },
    onUp: (listener: () => void) => {
      upListeners.add(listener);
      return () => upListeners.delete(listener);
    },
  };
  databases.add(r);
  return r;
}

/** `promise`, or StoreUnavailable as soon as `r` is down (at once when it is already). */
function guarded<T>(r: Reachability, promise: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const fail = () => reject(r.unavailable());
    if (r.isDown()) fail();
    const settled = r.onDown(fail);
    promise.then(
      (value) => {
        settled();
        resolve(value);
      },
      (err: unknown) => {
        settled();
        reject(err);
      },
    );
  });
}

/**
 * Which database a service uses, in words for people (the ready line, the console): PostgreSQL with its host,
 * port and database name (never its user or password), or the embedded SQLite files in the data directory.
 */
export function describeDatabase(databaseUrl: string | undefined, dataDir: string): string {
  if (!databaseUrl) return `SQLite in ${dataDir}`;
  try {
    const url = new URL(databaseUrl);
    const name = decodeURIComponent(url.pathname.replace(/^\//, '')) || '(default database)';
    return `PostgreSQL ${url.hostname || 'localhost'}:${url.port || '5432'}/${name}`;
  } catch {
    // A URL the driver takes but URL cannot parse (a socket path, key=value): no part of it is shown.
    return 'PostgreSQL (DATABASE_URL)';
  }
}
