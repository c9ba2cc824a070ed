import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import { parseRule } from '../../../lib/config/sign-in.ts';
import { postgresDbTracked, sqliteDb } from '../../../lib/db/kysely.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import type { IdentityDatabase } from '../../../lib/identity/schema.ts';
import { IdentityStore } from '../../../lib/identity/store.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// Who a person an identity provider vouches for is here, on both databases: found again by issuer and subject,
// linked to the user the operator made with their verified email, made by the operator's rule, or refused (and
// nothing made); a removed user stays out until the operator adds them again.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const backends = [
  {
    name: 'SQLite',
    async open() {
      const dir = await mkdtemp(path.join(tmpdir(), 'sign-in-'));
      dirs.push(dir);
      return new IdentityStore(sqliteDb<IdentityDatabase>(openDatabase(path.join(dir, 'identity.db'))));
    },
  },
  {
    name: 'PostgreSQL',
    async open() {
      const url = await freshDatabase('sign_in');
      return new IdentityStore(postgresDbTracked<IdentityDatabase>(openPostgres(url, 'test', { max: 4 })));
    },
  },
];

const ISSUER = 'https://id.example.com';
const rule = parseRule('@example.com, group:toolshift', 'groups', 'runner');

describe.each(backends)('signing in on $name', (backend) => {
  it('makes an admitted person a user once, and finds them again by their subject', async () => {
    const store = await backend.open();
    try {
      const first = await store.signIn(
        ISSUER,
        { sub: 'a-1', email: 'Alice@Example.com', email_verified: true, preferred_username: 'Alice Smith' },
        rule,
      );
      expect(first).toMatchObject({ made: true, user: { name: 'alice-smith' } });
      // Her email changed at the provider: still her, by issuer and subject.
      const again = await store.signIn(
        ISSUER,
        { sub: 'a-1', email: 'a@elsewhere.org', email_verified: true },
        rule,
      );
      expect(again).toEqual({ made: false, user: first.user });
      // Another provider's a-1 is another person (and not admitted).
      await expect(store.signIn('https://other.example', { sub: 'a-1' }, rule)).rejects.toMatchObject({
        status: 403,
      });
      // Someone else named alice-smith gets a name of their own.
      const twin = await store.signIn(
        ISSUER,
        {
          sub: 'a-2',
          email: 'alice.smith@example.com',
          email_verified: true,
          preferred_username: 'alice-smith',
        },
        rule,
      );
      expect(twin.user.name).toBe('alice-smith-2');
      expect((await store.user('alice-smith'))?.email).toBe('alice@example.com');
    } finally {
      await store.close();
    }
  });

  it('links the user the operator made with the verified email, whatever the rule says', async () => {
    const store = await backend.open();
    try {
      const made = await store.addUser({ name: 'carol', email: 'Carol@Partner.org' });
      const none = parseRule('', 'groups', 'runner');
      const signed = await store.signIn(
        ISSUER,
        { sub: 'c-1', email: 'carol@partner.org', email_verified: true },
        none,
      );
      expect(signed).toEqual({ made: false, user: { id: made.id, name: 'carol' } });
      // An unverified email links nobody.
      await expect(
        store.signIn(ISSUER, { sub: 'c-2', email: 'carol@partner.org', email_verified: false }, none),
      ).rejects.toMatchObject({ status: 403, message: expect.stringContaining('the operator adds users') });
    } finally {
      await store.close();
    }
  });

  it('refuses whoever the rule does not admit, saying what would, and makes nothing', async () => {
    const store = await backend.open();
    try {
      const refused = [
        { sub: 'e-1', email: 'eve@elsewhere.org', email_verified: true, groups: ['other'] },
        { sub: 'e-2', email: 'eve@example.com', email_verified: 'yes' },
        { sub: 'e-3', email: 'eve@example.com.evil.org', email_verified: true },
        { sub: 'e-4', groups: 'toolshift-admins' },
        { sub: 42 },
      ];
      for (const claims of refused) {
        await expect(store.signIn(ISSUER, claims, rule)).rejects.toMatchObject({
          message: expect.stringMatching(
            /needs a verified email at example\.com or group toolshift|no subject/,
          ),
        });
      }
      expect(await store.users()).toEqual([]);
      const byGroup = await store.signIn(ISSUER, { sub: 'g-1', groups: ['x', 'toolshift'] }, rule);
      expect(byGroup).toMatchObject({ made: true, user: { name: 'user' } });
    } finally {
      await store.close();
    }
  });

  it('keeps a removed user out until the operator adds them again with their email', async () => {
    const store = await backend.open();
    try {
      const claims = { sub: 'd-1', email: 'dan@example.com', email_verified: true };
      const first = await store.signIn(ISSUER, claims, rule);
      await store.removeUser(first.user.name);
      await expect(store.signIn(ISSUER, claims, rule)).rejects.toMatchObject({
        status: 403,
        message: expect.stringContaining('removed by the operator'),
      });
      expect(await store.users()).toEqual([]);
      const back = await store.addUser({ name: 'daniel', email: 'dan@example.com' });
      expect((await store.signIn(ISSUER, claims, rule)).user).toEqual({ id: back.id, name: 'daniel' });
    } finally {
      await store.close();
    }
  });

  it('never lets another account with the same email take over a user who signs in already', async () => {
    const store = await backend.open();
    try {
      const first = await store.signIn(
        ISSUER,
        { sub: 'f-1', email: 'fay@example.com', email_verified: true },
        rule,
      );
      // A second account at the provider (or another provider) that says the same, verified, email.
      for (const [issuer, sub] of [
        [ISSUER, 'f-2'],
        ['https://other.example', 'f-1'],
      ]) {
        await expect(
          store.signIn(issuer, { sub, email: 'FAY@example.com', email_verified: true }, rule),
        ).rejects.toMatchObject({
          status: 403,
          message: expect.stringContaining('signs in through another account'),
        });
      }
      expect((await store.users()).map((u) => u.id)).toEqual([first.user.id]);
      // The operator's user with an email in another case (made before emails were kept in lower case) is found.
      await store.addUser({ name: 'gus', email: 'gus@example.com' });
      const gus = await store.signIn(
        ISSUER,
        { sub: 'g-9', email: 'Gus@Example.COM', email_verified: 'true' },
        rule,
      );
      expect(gus).toMatchObject({ made: false, user: { name: 'gus' } });
    } finally {
      await store.close();
    }
  });

  it('keeps a removed user out under any account with their email', async () => {
    const store = await backend.open();
    try {
      const first = await store.signIn(
        ISSUER,
        { sub: 'h-1', email: 'hal@example.com', email_verified: true },
        rule,
      );
      await store.removeUser(first.user.name);
      // Another subject (a pairwise sub, another app, a re-made account): still removed, no new user.
      await expect(
        store.signIn(ISSUER, { sub: 'h-pairwise', email: 'hal@example.com', email_verified: true }, rule),
      ).rejects.toMatchObject({ status: 403, message: expect.stringContaining('removed by the operator') });
      expect(await store.users()).toEqual([]);
      await store.addUser({ name: 'hal', email: 'hal@example.com' });
      const back = await store.signIn(
        ISSUER,
        { sub: 'h-pairwise', email: 'hal@example.com', email_verified: true },
        rule,
      );
      expect(back).toMatchObject({ made: false, user: { name: 'hal' } });
    } finally {
      await store.close();
    }
  });

  it('makes one user when first sign-ins of one person race', async () => {
    const store = await backend.open();
    try {
      const claims = { sub: 'r-1', email: 'rae@example.com', email_verified: true };
      // Five at once (an MCP client's parallel first requests): one user, whichever way they interleave.
      const all = await Promise.all(Array.from({ length: 5 }, () => store.signIn(ISSUER, claims, rule)));
      for (const one of all) expect(one.user).toEqual(all[0].user);
      expect((await store.users()).map((u) => u.name)).toEqual(['rae']);
    } finally {
      await store.close();
    }
  });
});

describe('the sign-in settings', () => {
  const base = { TOOLSHIFT_DATA_DIR: '/tmp/x' };
  it('says which variable is missing or malformed', () => {
    expect(() => loadConfig({ ...base, OIDC_ISSUER: 'https://id.example.com' })).toThrow(/OIDC_CLIENT_ID/);
    expect(() => loadConfig({ ...base, OIDC_CLIENT_ID: 'x' })).toThrow(/OIDC_ISSUER: OIDC_CLIENT_ID is set/);
    expect(() => loadConfig({ ...base, OIDC_ISSUER: 'ftp://id' })).toThrow(/OIDC_ISSUER: must be an http/);
    expect(() => loadConfig({ ...base, OIDC_ALLOW: 'example.com' })).toThrow(
      /neither @domain .* nor group:NAME/,
    );
    expect(() => loadConfig({ ...base, OIDC_ROLE: 'admin' })).toThrow(/OIDC_ROLE: must be one of viewer/);
    const issuer = { ...base, OIDC_ISSUER: 'https://id.example.com', OIDC_CLIENT_ID: 'x' };
    expect(() => loadConfig({ ...issuer, OIDC_ROLE: 'operator', OIDC_ALLOW: '@example.com' })).toThrow(
      /OIDC_ROLE: operator for everyone OIDC_ALLOW lets in/,
    );
    expect(() => loadConfig({ ...issuer, OIDC_ISSUER: 'http://id.example.com' })).toThrow(
      /OIDC_ISSUER: must be an https URL/,
    );
    expect(() => loadConfig({ ...base, MCP_OAUTH_ISSUER: 'http://id.example.com' })).toThrow(
      /MCP_OAUTH_ISSUER: must be an https URL/,
    );
    expect(() => loadConfig({ ...base, OIDC_CLIENT_SECRET: 's' })).toThrow(
      /OIDC_CLIENT_SECRET: is set without OIDC_ISSUER/,
    );
    expect(() => loadConfig({ ...base, OIDC_ALLOW: '@example.com' })).toThrow(
      /OIDC_ALLOW: is set, but nobody signs in/,
    );
    expect(() => loadConfig({ ...base, MCP_OAUTH_RESOURCE: 'https://gw.example.com/mcp' })).toThrow(
      /MCP_OAUTH_ISSUER/,
    );
  });
  it('turns sign-in on only when it is configured', () => {
    expect(loadConfig(base).signIn).toEqual({
      rule: { domains: [], groups: [], groupsClaim: 'groups', role: 'runner' },
    });
    const on = loadConfig({
      ...base,
      OIDC_ISSUER: 'https://id.example.com',
      OIDC_CLIENT_ID: 'toolshift',
      OIDC_ALLOW: '@Example.com,group:eng',
      MCP_OAUTH_RESOURCE: 'https://gw.example.com/mcp',
    }).signIn;
    expect(on).toMatchObject({
      console: { issuer: 'https://id.example.com', clientId: 'toolshift' },
      mcp: { resource: 'https://gw.example.com/mcp', issuer: 'https://id.example.com' },
      rule: { domains: ['example.com'], groups: ['eng'] },
    });
  });
});
