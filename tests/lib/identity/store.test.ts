import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresDbTracked, sqliteDb } from '../../../lib/db/kysely.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { LimitReached } from '../../../lib/identity/limits.ts';
import type { IdentityDatabase } from '../../../lib/identity/schema.ts';
import { IdentityStore } from '../../../lib/identity/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// The identity store on both databases: users, teams, keys (the secret never kept), why a key is refused, and
// limits counted in the database (two stores on one database share the count, as two replicas do).

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const backends = [
  {
    name: 'SQLite',
    async fresh() {
      const dir = await mkdtemp(path.join(tmpdir(), 'identity-'));
      dirs.push(dir);
      const file = path.join(dir, 'identity.db');
      return { open: () => new IdentityStore(sqliteDb<IdentityDatabase>(openDatabase(file))), file };
    },
  },
  {
    name: 'PostgreSQL',
    async fresh() {
      const url = await freshDatabase('identity');
      return {
        open: () =>
          new IdentityStore(postgresDbTracked<IdentityDatabase>(openPostgres(url, 'test', { max: 2 }))),
        file: undefined,
      };
    },
  },
];

describe.each(backends)('the identity store on $name', (backend) => {
  it('makes users, teams and keys; a key is shown once and only its hash is kept', async () => {
    const place = await backend.fresh();
    const store = place.open();
    try {
      await store.addTeam({ name: 'eng', limits: { tasks_per_hour: 5 } });
      const alice = await store.addUser({ name: 'alice', email: 'alice@example.org', teams: ['eng'] });
      expect(alice).toMatchObject({ name: 'alice', teams: ['eng'], limits: {} });
      await expect(store.addUser({ name: 'alice' })).rejects.toThrow(/user alice already exists/);
      await expect(store.addUser({ name: 'Bad Name' })).rejects.toThrow(/lower-case letters/);
      await expect(store.addUser({ name: 'bob', teams: ['nope'] })).rejects.toThrow(/no team "nope"/);
      const made = await store.createKey({ user: 'alice', role: 'runner', expiresInMs: 86_400_000 });
      // The secret: the key after `tsk_<id>_` (base64url, which may hold '_' itself).
      const secret = made.key.slice(`tsk_${made.id}_`.length);
      expect(secret).toHaveLength(43);
      expect(made.key).toMatch(new RegExp(`^tsk_${made.id}_`));
      expect(made.expires_at).not.toBeNull();
      const listed = await store.keys('alice');
      expect(listed).toHaveLength(1);
      expect(JSON.stringify(listed)).not.toContain(secret);
      if (place.file) {
        // Nothing of the secret on disk: the file (and its WAL) hold only the hash.
        await store.close();
        const bytes = await readFile(place.file).then((b) => b.toString('latin1'));
        const wal = await readFile(`${place.file}-wal`).then(
          (b) => b.toString('latin1'),
          () => '',
        );
        expect(bytes + wal).not.toContain(secret);
        expect(bytes + wal).toContain(made.id);
      }
    } finally {
      await store.close().catch(() => undefined);
    }
  });

  it('finds the users who share a team with one: each once, not the user, not after they leave', async () => {
    const store = (await backend.fresh()).open();
    try {
      await store.addTeam({ name: 'eng' });
      await store.addTeam({ name: 'ops' });
      const user = async (name: string, teams: string[]) => (await store.addUser({ name, teams })).id;
      const carol = await user('carol', ['eng', 'ops']);
      const bob = await user('bob', ['eng', 'ops']);
      const dave = await user('dave', ['ops']);
      const olga = await user('olga', []);
      expect((await store.teammates(carol)).sort()).toEqual([bob, dave].sort());
      expect(await store.teammates(olga)).toEqual([]);
      await store.setMember('ops', 'dave', false);
      expect(await store.teammates(carol)).toEqual([bob]);
      expect(await store.teammates('usr_unknown')).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('says why a key is refused: unknown, wrong secret, revoked, expired, its user removed', async () => {
    const store = (await backend.fresh()).open();
    try {
      await store.addUser({ name: 'carol' });
      const a = await store.createKey({ user: 'carol', role: 'approver' });
      const check = await store.checkKey(a.key);
      expect(check).toMatchObject({ holder: { keyId: a.id, role: 'approver', user: { name: 'carol' } } });
      expect(await store.checkKey('not-a-key')).toBeUndefined();
      const forged = `tsk_${a.id}_${'A'.repeat(43)}`;
      expect(await store.checkKey(forged)).toEqual({ refused: 'Invalid credentials: no such key' });
      expect(await store.checkKey(`tsk_zzzzzzzzzz_${'A'.repeat(43)}`)).toEqual({
        refused: 'Invalid credentials: no such key',
      });
      const b = await store.createKey({ user: 'carol', role: 'runner', expiresInMs: 60_000 });
      expect(await store.checkKey(b.key, Date.now() + 61_000)).toMatchObject({
        refused: expect.stringMatching(new RegExp(`key ${b.id} expired at`)),
      });
      await store.revokeKey(a.id);
      expect(await store.checkKey(a.key)).toMatchObject({
        refused: expect.stringMatching(new RegExp(`key ${a.id} was revoked at`)),
      });
      await expect(store.revokeKey('nokey')).rejects.toThrow(/no key "nokey"/);
      await store.removeUser('carol');
      expect(await store.checkKey(b.key)).toMatchObject({
        refused: `Invalid credentials: key ${b.id} belongs to a user who was removed`,
      });
      expect((await store.keys()).map((k) => k.user)).toEqual(['(removed)', '(removed)']);
    } finally {
      await store.close();
    }
  });

  it('counts a limit across two stores on one database, refuses past it with whose and when, all or none', async () => {
    const place = await backend.fresh();
    const [one, two] = [place.open(), place.open()];
    try {
      await one.addTeam({ name: 'ops', limits: { tasks_per_hour: 3 } });
      await one.addUser({
        name: 'dan',
        teams: ['ops'],
        limits: { tasks_per_hour: 10, tool_calls_per_minute: 2 },
      });
      await one.addUser({ name: 'eve', teams: ['ops'] });
      const holder = async (name: string, s: IdentityStore) => {
        const k = await s.createKey({ user: name, role: 'runner' });
        const c = await s.checkKey(k.key);
        if (!c || !('holder' in c)) throw new Error('no holder');
        return c.holder;
      };
      const [dan, eve] = [await holder('dan', one), await holder('eve', two)];
      const now = Date.now();
      // The team's 3 an hour are shared by its members, whichever store counts them.
      await one.charge(dan.subjects, 'tasks_per_hour', 1, now);
      await two.charge(eve.subjects, 'tasks_per_hour', 1, now);
      await two.charge(dan.subjects, 'tasks_per_hour', 1, now);
      const past = await one.charge(eve.subjects, 'tasks_per_hour', 1, now).catch((e: unknown) => e);
      expect(past).toBeInstanceOf(LimitReached);
      expect((past as LimitReached).status).toBe(429);
      expect((past as LimitReached).message).toMatch(
        /^team ops reached the limit tasks_per_hour \(3\); it resets in \d+ s$/,
      );
      expect((past as LimitReached).headers['retry-after']).toMatch(/^\d+$/);
      // Dan's own tool calls: 2 a minute. The third is refused, and counted nowhere.
      await one.charge(dan.subjects, 'tool_calls_per_minute', 1, now);
      await two.charge(dan.subjects, 'tool_calls_per_minute', 1, now);
      await expect(one.charge(dan.subjects, 'tool_calls_per_minute', 1, now)).rejects.toThrow(
        /user dan reached the limit tool_calls_per_minute \(2\)/,
      );
      // The next window starts afresh.
      await one.charge(dan.subjects, 'tool_calls_per_minute', 1, now + 60_000);
      // Tokens are counted after the fact; the next call is refused once they are spent.
      await one.setUserLimits('eve', { model_tokens_per_day: 1000 });
      const eve2 = await holder('eve', one);
      await one.refuseIfSpent(eve2.subjects, 'model_tokens_per_day', now);
      await one.add(eve2.subjects, 'model_tokens_per_day', 1200, now);
      await expect(two.refuseIfSpent(eve2.subjects, 'model_tokens_per_day', now)).rejects.toThrow(
        /user eve reached the limit model_tokens_per_day \(1000\)/,
      );
      // Given back in the window it was counted in, never below zero: a refund in the next window adds nothing.
      await one.addUser({ name: 'fay', limits: { tasks_per_hour: 2 } });
      const fay = await holder('fay', one);
      const [h1, h2] = [now + 3_600_000, now + 7_200_000];
      await one.charge(fay.subjects, 'tasks_per_hour', 1, h1);
      await one.giveBack(fay.subjects, 'tasks_per_hour', 1, h1);
      await one.giveBack(fay.subjects, 'tasks_per_hour', 5, h2);
      for (const at of [h1, h2]) {
        await one.charge(fay.subjects, 'tasks_per_hour', 2, at);
        await expect(one.charge(fay.subjects, 'tasks_per_hour', 1, at)).rejects.toThrow(
          /user fay reached the limit tasks_per_hour \(2\)/,
        );
      }
      expect(await one.pruneUsage(now + 2 * 86_400_000)).toBeGreaterThan(0);
      await one.refuseIfSpent(eve2.subjects, 'model_tokens_per_day', now);
    } finally {
      await one.close();
      await two.close();
    }
  });
});
