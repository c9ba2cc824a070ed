import { createSyncFn } from 'synckit';

// PostgreSQL for code written against a synchronous database (the gateway's stores, written for SQLite): each
// statement runs on a connection held by one worker thread while the caller waits, as a better-sqlite3 call
// waits for the disk. Statements of one connection run in order, so a transaction is BEGIN … COMMIT sent one
// by one. A stuck server is an error after `timeoutMs`, not a thread waiting for ever.

interface Reply {
  rows: Record<string, unknown>[];
  rowCount: number;
}

const call = createSyncFn<(r: unknown) => Promise<Reply>>(
  new URL('./postgres-sync-worker.ts', import.meta.url),
  { tsRunner: 'node', timeout: 30_000 },
);

let nextConn = 1;

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
  const send = (sql: string, params: readonly unknown[] = []) =>
    call({ op: 'query', conn, url, service, timeoutMs, sql, params });
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
    close: () => void call({ op: 'close', conn }),
  };
}
