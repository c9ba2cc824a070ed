import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresDbTracked, sqliteDb } from '../../../lib/db/kysely.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import type { IdentityDatabase } from '../../../lib/identity/schema.ts';
import { sealer } from '../../../lib/identity/sealed.ts';
import { IdentityStore } from '../../../lib/identity/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// People's own upstream accounts in the identity store, on both databases: secrets and OAuth grants kept sealed
// and bound to whose they are, the gateway's clients, and flows taken once — by one of two replicas racing.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const backends = [
  {
    name: 'SQLite',
    async place() {
      const dir = await mkdtemp(path.join(tmpdir(), 'accounts-'));
      dirs.push(dir);
      const file = path.join(dir, 'identity.db');
      return { open: () => new IdentityStore(sqliteDb<IdentityDatabase>(openDatabase(file))), file };
    },
  },
  {
    name: 'PostgreSQL',
    async place() {
      const url = await freshDatabase('accounts');
      const open = () =>
        new IdentityStore(postgresDbTracked<IdentityDatabase>(openPostgres(url, 'test', { max: 4 })));
      return { open, file: undefined };
    },
  },
];

const seal = sealer('the-seal-key-of-this-test-0123456789abcdef');

describe.each(backends)("people's own accounts on $name", (backend) => {
  it('keeps secrets and grants sealed, bound to whose they are', async () => {
    const place = await backend.place();
    const store = place.open();
    try {
      await store.setSecret(seal, {
        user: 'usr_a',
        toolset: 'gh',
        name: 'GH_TOKEN',
        value: 'ghp_alice_value_1',
      });
      await store.setSecret(seal, {
        user: 'usr_a',
        toolset: 'gh',
        name: 'GH_TOKEN',
        value: 'ghp_alice_value_2',
      });
      expect(await store.secretsFor(seal, 'usr_a', 'gh')).toEqual({ GH_TOKEN: 'ghp_alice_value_2' });
      expect(await store.secretsFor(seal, 'usr_b', 'gh')).toEqual({});
      // Under another key nothing opens.
      expect(await store.secretsFor(sealer('another-key-entirely-0123456789abcdef'), 'usr_a', 'gh')).toEqual(
        {},
      );
      const oauth = store.oauth(seal);
      await oauth.saveGrant({
        user: 'usr_a',
        toolset: 'gh',
        tokens: { access_token: 'at_alice', refresh_token: 'rt_alice' },
        scopes: ['repo', 'read:org'],
        expires_at: 1_900_000_000_000,
      });
      expect(await oauth.grantOf('usr_a', 'gh')).toEqual({
        tokens: { access_token: 'at_alice', refresh_token: 'rt_alice' },
        scopes: ['repo', 'read:org'],
        expires_at: 1_900_000_000_000,
      });
      expect(await oauth.grantOf('usr_b', 'gh')).toBeUndefined();
      await oauth.saveClient('https://as.example', { client_id: 'c1', client_secret: 'cs_secret' });
      expect(await oauth.clientOf('https://as.example')).toEqual({
        client_id: 'c1',
        client_secret: 'cs_secret',
      });
      expect(await oauth.dropGrant('usr_a', 'gh')).toBe(true);
      expect(await oauth.grantOf('usr_a', 'gh')).toBeUndefined();
      if (place.file) {
        // The database and its write-ahead log.
        for (const file of [place.file, `${place.file}-wal`]) {
          const bytes = await readFile(file).catch(() => Buffer.alloc(0));
          for (const plain of ['ghp_alice_value', 'rt_alice', 'cs_secret']) {
            expect(bytes.includes(plain), `${plain} in ${file}`).toBe(false);
          }
        }
      }
    } finally {
      await store.close();
    }
  });

  it('gives a flow to exactly one of two stores racing for it, and only to its own user', async () => {
    const place = await backend.place();
    const [one, two] = [place.open(), place.open()];
    try {
      const flow = {
        stateHash: 'h1',
        user: 'usr_a',
        toolset: 'gh',
        kept: { verifier: 'v' },
        expiresAt: Date.now() + 60_000,
      };
      await one.oauth(seal).startFlow(flow);
      expect(await two.oauth(seal).takeFlow('h1', 'usr_b', 'gh')).toEqual({ ok: false, why: 'another_user' });
      const taken = await Promise.all([
        one.oauth(seal).takeFlow('h1', 'usr_a', 'gh'),
        two.oauth(seal).takeFlow('h1', 'usr_a', 'gh'),
      ]);
      expect(taken.filter((t) => t.ok)).toEqual([{ ok: true, toolset: 'gh', kept: { verifier: 'v' } }]);
      expect(await one.oauth(seal).takeFlow('h1', 'usr_a', 'gh')).toEqual({ ok: false, why: 'unknown' });
    } finally {
      await one.close();
      await two.close();
    }
  });
});
