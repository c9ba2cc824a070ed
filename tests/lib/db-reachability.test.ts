import { describe, expect, it } from 'vitest';
import {
  createReachability,
  databaseHealth,
  StoreUnavailable,
  unreachable,
} from '../../lib/db/reachability.ts';

// Whether a service's database can be reached, as its statements found it (lib/db/reachability.ts): what
// /health says, and what a request that needs the database is answered while it cannot be.

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('database reachability', () => {
  it('tells an unreachable server from a statement it refused, and from a bug', () => {
    expect(unreachable(refused)).toBe(true);
    expect(unreachable(Object.assign(new Error('terminating connection'), { code: '57P01' }))).toBe(true);
    expect(
      unreachable(Object.assign(new Error('the database system is starting up'), { code: '57P03' })),
    ).toBe(true);
    expect(unreachable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(unreachable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    // Refused statements and bugs are not waited out: they would be for ever.
    expect(unreachable(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(unreachable(Object.assign(new Error('canceling statement'), { code: '57014' }))).toBe(false);
    expect(unreachable(new TypeError('x.map is not a function'))).toBe(false);
  });

  it('is down from the first statement that could not reach it, with since when and why, up at the next that did', async () => {
    const reach = createReachability('PostgreSQL, DATABASE_URL');
    try {
      await expect(reach.track(() => Promise.reject(refused))).rejects.toBeInstanceOf(StoreUnavailable);
      expect(reach.health()).toMatchObject({ state: 'unreachable', error: refused.message });
      expect(databaseHealth()).toMatchObject({ state: 'unreachable' });
      const err = reach.unavailable();
      expect(err).toMatchObject({
        status: 503,
        headers: { 'retry-after': '5' },
        details: { code: 'store_unavailable', unreachable_since: expect.any(String) },
      });
      expect(err.message).toMatch(/^The database \(PostgreSQL, DATABASE_URL\) is unreachable since /);
      // A request does not wait for the database while it is down.
      await expect(reach.guard(new Promise(() => {}))).rejects.toBeInstanceOf(StoreUnavailable);
      // A statement the server answered, even with an error of its own: it is there.
      const own = Object.assign(new Error('duplicate key'), { code: '23505' });
      await expect(reach.track(() => Promise.reject(own))).rejects.toBe(own);
      expect(reach.health()).toEqual({ state: 'ok' });
      expect(reach.backAt()).toEqual(expect.any(Number));
    } finally {
      reach.forget();
    }
    expect(databaseHealth()).toEqual({ state: 'ok' });
  });

  it('fails a waiting request as soon as the database goes down', async () => {
    const reach = createReachability('PostgreSQL, DATABASE_URL');
    try {
      const waiting = reach.guard(new Promise(() => {}));
      reach.down(refused);
      await expect(waiting).rejects.toBeInstanceOf(StoreUnavailable);
    } finally {
      reach.forget();
    }
  });
});
