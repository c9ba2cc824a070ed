import { createSyncFn } from 'synckit';
import { createReachability, unreachable } from './db-reachability.ts';

// PostgreSQL for code written against a synchronous database (the gateway's stores, written for SQLite): each
// statement runs on a connection held by one worker thread while the caller waits, as a better-sqlite3 call
// waits for the disk. Statements of one connection run in order, so a transaction is BEGIN … COMMIT sent one
// by one. A stuck server is an error after `timeoutMs` (3 s to connect), not a thread waiting for ever, and once
// it could not be reached the next statements fail at once for RETRY_MS rather than each waiting again: with
// StoreUnavailable (503 and Retry-After to a request), and /health says since when (lib/db-reachability.ts).

interface Reply {
  rows: Record<string, unknown>[];
  rowCount: number;
}

const call = createSyncFn<(r: unknown) => Promise<Reply>>(
  new URL('./postgres-sync-worker.ts', import.meta.url),
  { tsRunner: 'node', timeout: 30_000 },
);

let nextConn = 1;

/** How long statements fail at once after the server could not be reached. */
const RETRY_MS = 2000;

/** One connection to PostgreSQL with synchronous statements. */
export interface SyncPostgres {
  /** The rows of one statement (`$1`… parameters). */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): T[];
  /** Runs one statement; the rows it changed. */
  run(sql: string, params?: readonly unknown[]): number;
  /** Runs `work` in a transaction: committed when it returns, rolled back when it throws. */
  transaction<T>(work: () => T): T;
  close(): void;
}

/** A synchronous connection to `url` for `service` (named in pg_stat_activity). */
export function openSyncPostgres(
  url: string,
  service: string,
  opts: { timeoutMs?: number } = {},
): SyncPostgres {
  const conn = nextConn++;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  /** After a failure to reach the server, statements fail at once for a moment instead of waiting each. */
  let downUntil = 0;
  const reach = createReachability('PostgreSQL, DATABASE_URL');
  const send = (sql: string, params: readonly unknown[] = []) => {
    // ROLLBACK goes through: it ends a transaction the worker holds as lost.
    if (Date.now() < downUntil && sql !== 'ROLLBACK') throw reach.unavailable();
    let reply: Reply;
    try {
      reply = call({ op: 'query', conn, url, service, timeoutMs, sql, params });
    } catch (err) {
      if (!unreachable(err)) {
        reach.up();
        throw err;
      }
      downUntil = Date.now() + RETRY_MS;
      reach.down(err);
      throw reach.unavailable();
    }
    reach.up();
    return reply;
  };
  let depth = 0;
  return {
    query: <T>(sql: string, params?: readonly unknown[]) => send(sql, params).rows as T[],
    run: (sql, params) => send(sql, params).rowCount,
    transaction<T>(work: () => T): T {
      // A transaction inside another is part of it.
      if (depth > 0) return work();
      send('BEGIN');
      depth++;
      try {
        const result = work();
        send('COMMIT');
        return result;
      } catch (err) {
        try {
          send('ROLLBACK');
        } catch {
          // The connection is gone: the server rolled back.
        }
        throw err;
      } finally {
        depth--;
      }
    },
    close: () => {
      reach.forget();
      call({ op: 'close', conn });
    },
  };
}
