import pg from 'pg';
import { runAsWorker } from 'synckit';

// The thread behind lib/postgres-sync.ts: holds its connections and runs one statement per request while
// the calling thread waits. Each connection is opened on first use and again after it failed.

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

const clients = new Map<number, Promise<pg.Client>>();

function connect(r: Extract<Request, { op: 'query' }>): Promise<pg.Client> {
  let client = clients.get(r.conn);
  if (!client) {
    const c = new pg.Client({
      connectionString: r.url,
      application_name: `toolshift ${r.service}`,
      connectionTimeoutMillis: r.timeoutMs,
      // The server cancels a slow statement; a server that went silent is given up here.
      statement_timeout: r.timeoutMs,
      query_timeout: r.timeoutMs + 1000,
      keepAlive: true,
    });
    // A dropped connection is forgotten: the next statement opens a new one.
    c.on('error', () => clients.delete(r.conn));
    c.on('end', () => clients.delete(r.conn));
    client = c.connect().then(() => c);
    client.catch(() => clients.delete(r.conn));
    clients.set(r.conn, client);
  }
  return client;
}

runAsWorker(async (r: Request) => {
  if (r.op === 'close') {
    const client = clients.get(r.conn);
    clients.delete(r.conn);
    await client?.then((c) => c.end()).catch(() => undefined);
    return { rows: [], rowCount: 0 };
  }
  const client = await connect(r);
  const res = await client.query(r.sql, r.params);
  return { rows: res.rows, rowCount: res.rowCount ?? 0 };
});
