import pg from 'pg';
import { runAsWorker } from 'synckit';

// The thread behind lib/postgres-sync.ts: holds its connections and runs one statement per request while
// the calling thread waits. Each connection is opened on first use and again after it failed — except in the
// middle of a transaction: what the transaction did went with the connection, so its next statements are
// refused until its ROLLBACK (running them on a new connection would commit half of it).

type Request =
  | {
      op: 'query';
      conn: number;
      url: string;
      service: string;
      timeoutMs: number;
      sql: string;
      params: unknown[];
    }
  | { op: 'close'; conn: number };

// BIGINT columns (times in ms, counts) as numbers: every one stored here is far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, Number);

interface Held {
  client?: Promise<pg.Client>;
  /** Between BEGIN and COMMIT or ROLLBACK. */
  inTransaction: boolean;
  /** The connection was lost inside a transaction: refused until ROLLBACK. */
  lost: boolean;
}

const held = new Map<number, Held>();

function connect(r: Extract<Request, { op: 'query' }>, h: Held): Promise<pg.Client> {
  if (h.client) return h.client;
  const c = new pg.Client({
    connectionString: r.url,
    application_name: `toolshift ${r.service}`,
    connectionTimeoutMillis: Math.min(r.timeoutMs, 3000),
    // The server cancels a slow statement and a lock waited for too long, and ends a transaction left open
    // (a frozen process); a server that went silent is given up here.
    statement_timeout: r.timeoutMs,
    lock_timeout: Math.min(r.timeoutMs, 5000),
    idle_in_transaction_session_timeout: 30_000,
    query_timeout: r.timeoutMs + 1000,
    keepAlive: true,
  });
  const gone = () => {
    if (h.client !== client) return;
    h.client = undefined;
    if (h.inTransaction) h.lost = true;
  };
  c.on('error', gone);
  c.on('end', gone);
  const client = c.connect().then(() => c);
  client.catch(gone);
  h.client = client;
  return client;
}

runAsWorker(async (r: Request) => {
  if (r.op === 'close') {
    const client = held.get(r.conn)?.client;
    held.delete(r.conn);
    await client?.then((c) => c.end()).catch(() => undefined);
    return { rows: [], rowCount: 0 };
  }
  let h = held.get(r.conn);
  if (!h) {
    h = { inTransaction: false, lost: false };
    held.set(r.conn, h);
  }
  if (h.lost) {
    if (r.sql === 'ROLLBACK') {
      h.lost = false;
      h.inTransaction = false;
      return { rows: [], rowCount: 0 };
    }
    throw new Error(
      'the connection to PostgreSQL was lost inside a transaction, which the server rolled back',
    );
  }
  if (r.sql === 'BEGIN') h.inTransaction = true;
  const client = await connect(r, h);
  try {
    const res = await client.query(r.sql, r.params);
    return { rows: res.rows, rowCount: res.rowCount ?? 0 };
  } finally {
    if (r.sql === 'COMMIT' || r.sql === 'ROLLBACK') h.inTransaction = false;
    // A ROLLBACK sent on a connection whose end was not seen yet ends the transaction too, even when the end
    // is seen (and marks it lost) while the ROLLBACK waits: nothing is left to refuse.
    if (r.sql === 'ROLLBACK') h.lost = false;
  }
});
