import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { databaseHealth, StoreUnavailable } from '../../../lib/db/reachability.ts';
import { openGatewayState } from '../../../mcp-gateway/store/store.ts';
import { startTestPostgres, type TestPostgres } from '../../helpers/postgres.ts';

// The gateway's store on PostgreSQL while the server is away (a cluster of this test's own, stopped and
// started again): its statements go through the pool, and each one notes whether the server answered, so
// /health says the database is unreachable and since when, a request gets StoreUnavailable (503,
// Retry-After) at once instead of waiting, and everything works again once the server is back.

let server: TestPostgres;
beforeAll(async () => {
  server = await startTestPostgres();
}, 60_000);
afterAll(() => server?.stop());

describe('the gateway store on PostgreSQL through an outage', () => {
  it('refuses with StoreUnavailable at once while the server is down, says so on /health, and recovers', async () => {
    const lost: unknown[] = [];
    const state = await openGatewayState({ databaseUrl: server.url }, { onWriteError: (e) => lost.push(e) });
    try {
      await state.store.activate('s1', ['fs_read'], []);
      expect(databaseHealth()).toEqual({ state: 'ok' });
      server.halt();
      // The first statement finds the server gone; the next ones are refused without trying.
      await expect(state.store.load('s1')).rejects.toBeInstanceOf(StoreUnavailable);
      expect(databaseHealth()).toMatchObject({ state: 'unreachable' });
      const started = performance.now();
      await expect(state.store.activate('s1', ['web'], [])).rejects.toMatchObject({ status: 503 });
      expect(performance.now() - started).toBeLessThan(1000);
      // An audit row queued meanwhile is reported, not thrown at the caller.
      state.store.audit({ session_id: 's1', kind: 'call', subject: 'x', ok: true }, { actor: 'test' });
      await state.store.flush();
      expect(lost).toHaveLength(1);
      expect(lost[0]).toBeInstanceOf(StoreUnavailable);
      server.restart();
      // The pool's probe finds it back within a second or two; the store answers again.
      await vi.waitFor(() => expect(databaseHealth()).toEqual({ state: 'ok' }), { timeout: 15_000 });
      expect((await state.store.load('s1')).toolsets).toEqual(['fs_read']);
      expect((await state.store.activate('s1', ['web'], [])).toolsets).toEqual(['fs_read', 'web']);
    } finally {
      await state.close();
    }
  }, 60_000);
});
