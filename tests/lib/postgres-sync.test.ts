import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseHealth, StoreUnavailable } from '../../lib/db-reachability.ts';
import { openSyncPostgres, type SyncPostgres } from '../../lib/postgres-sync.ts';
import { freshDatabase } from '../helpers/postgres.ts';

// The gateway's synchronous connection to PostgreSQL (lib/postgres-sync.ts), against the real server the test
// run starts: statements and transactions as SQLite's, a transaction that lost its connection never half
// committed, and a server that cannot be reached failing fast rather than holding every request.

const opened: SyncPostgres[] = [];
afterAll(() => {
  for (const db of opened) db.close();
});

const open = (url: string) => {
  const db = openSyncPostgres(url, 'test');
  opened.push(db);
  return db;
};

describe('synchronous PostgreSQL', () => {
  it('runs statements and transactions, rolled back when the work throws', async () => {
    const db = open(await freshDatabase('sync'));
    db.run('CREATE TABLE t (a INT)');
    expect(db.run('INSERT INTO t VALUES (1), (2)')).toBe(2);
    expect(() =>
      db.transaction(() => {
        db.run('INSERT INTO t VALUES (3)');
        throw new Error('changed my mind');
      }),
    ).toThrow('changed my mind');
    expect(db.query<{ n: number }>('SELECT count(*)::int AS n FROM t')[0].n).toBe(2);
    expect(() => db.query('SELECT nope')).toThrow(/column "nope" does not exist/);
    // A refused statement is not an unreachable server: the next one runs at once.
    expect(db.query<{ n: number }>('SELECT 1 AS n')[0].n).toBe(1);
  });

  it('a transaction whose connection is lost is refused to its end, never committed in part', async () => {
    const url = await freshDatabase('sync');
    const db = open(url);
    const other = open(url);
    db.run('CREATE TABLE t (a INT)');
    expect(() =>
      db.transaction(() => {
        db.run('INSERT INTO t VALUES (1)');
        const [{ pid }] = db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        other.query('SELECT pg_terminate_backend($1)', [pid]);
        // Without the guard this would run on a new connection, autocommitted: one row of the two.
        db.run('INSERT INTO t VALUES (2)');
      }),
    ).toThrow();
    expect(other.query<{ n: number }>('SELECT count(*)::int AS n FROM t')[0].n).toBe(0);
    // Once the transaction is over the connection is opened again (asked until a deadline, not a count of
    // tries: on a loaded machine the reconnection takes longer).
    let rows: { n: number }[] = [];
    for (const deadline = Date.now() + 20_000; rows.length === 0 && Date.now() < deadline; ) {
      try {
        rows = db.query<{ n: number }>('SELECT count(*)::int AS n FROM t');
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect(rows).toEqual([{ n: 0 }]);
  });

  it('a server that cannot be reached fails the next statements at once, saying so', async () => {
    // The tests' earlier connections closed: /health judges this one alone.
    for (const earlier of opened.splice(0)) earlier.close();
    // A port that was free a moment ago: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(port));
      });
    });
    const db = open(`postgres://nobody:secret-password@127.0.0.1:${port}/none`);
    expect(() => db.query('SELECT 1')).toThrow(/ECONNREFUSED/);
    let error: unknown;
    try {
      db.query('SELECT 1');
    } catch (err) {
      error = err;
    }
    // What a request that needed it is answered: 503, Retry-After, and since when the database is unreachable.
    expect(error).toBeInstanceOf(StoreUnavailable);
    expect(error).toMatchObject({ status: 503, headers: { 'retry-after': '5' } });
    const message = (error as Error).message;
    expect(message).toMatch(
      /^The database \(PostgreSQL, DATABASE_URL\) is unreachable since \S+Z \(.*ECONNREFUSED.*\); .* retry in 5 s$/,
    );
    expect(message).not.toContain('secret-password');
    expect(databaseHealth()).toMatchObject({
      state: 'unreachable',
      error: expect.stringMatching(/ECONNREFUSED/),
    });
    db.close();
    expect(databaseHealth()).toEqual({ state: 'ok' });
  });
});
