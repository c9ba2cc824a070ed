import path from 'node:path';
import type { SignInRule } from '../config/sign-in.ts';
import { migrate, postgresDbTracked, type StoreDb, sqliteDb } from '../db/kysely.ts';
import { openPostgres } from '../db/postgres.ts';
import { openDatabase } from '../db/sqlite.ts';
import {
  checkKey,
  createKey,
  holderOf,
  type KeyCheck,
  type KeyHolder,
  type KeyInfo,
  listKeys,
  pruneKeys,
  revokeKey,
  subjectsOf,
} from './key-rows.ts';
import type { KeyRole } from './keys.ts';
import type { LimitName, LimitSubject } from './limits.ts';
import type { LimitsChange } from './people.ts';
import * as people from './people.ts';
import { IDENTITY_COMPONENT, type IdentityDatabase, identityMigrations } from './schema.ts';
import type { Sealer } from './sealed.ts';
import { type Claims, type SignedIn, signInUser } from './sign-in.ts';
import { setTeamPolicy, setTeamToolsets, teamPoliciesFor, toolsetsDisabledFor } from './team-toolsets.ts';
import * as grants from './upstream-grants.ts';
import * as secrets from './upstream-secrets.ts';
import * as usage from './usage.ts';

export type { Team, User } from './people.ts';
export type { KeyCheck, KeyHolder, KeyInfo };

// The users, teams and keys of a deployment and what they used of their limits (schema.ts): opened once per
// process and database (the agent-server and the gateway of `npm start` share it), by each service that takes
// user keys. Its migrations run before its first statement; every method waits for them.

export class IdentityStore {
  readonly ready: Promise<void>;
  readonly #s: StoreDb<IdentityDatabase>;
  readonly #touched = new Map<string, number>();

  constructor(s: StoreDb<IdentityDatabase>) {
    this.#s = s;
    this.ready = migrate(s, IDENTITY_COMPONENT, identityMigrations());
  }

  async #db(): Promise<people.Db> {
    await this.ready;
    return this.#s.db;
  }

  async addUser(u: {
    name: string;
    email?: string;
    limits?: LimitsChange;
    teams?: string[];
  }): Promise<people.User> {
    await people.addUser(await this.#db(), u);
    return (await this.user(u.name)) as people.User;
  }
  async user(name: string): Promise<people.User | undefined> {
    return (await this.users()).find((u) => u.name === name);
  }
  async users(): Promise<people.User[]> {
    return people.listUsers(await this.#db());
  }
  async removeUser(name: string): Promise<void> {
    await people.removeUser(await this.#db(), name);
  }
  async setUserLimits(name: string, limits: LimitsChange): Promise<people.User> {
    await people.setLimits(await this.#db(), 'user', name, limits);
    return (await this.user(name)) as people.User;
  }
  async addTeam(t: { name: string; limits?: LimitsChange }): Promise<people.Team> {
    await people.addTeam(await this.#db(), t);
    return (await this.team(t.name)) as people.Team;
  }
  async team(name: string): Promise<people.Team | undefined> {
    return (await this.teams()).find((t) => t.name === name);
  }
  async teams(): Promise<people.Team[]> {
    return people.listTeams(await this.#db());
  }
  async removeTeam(name: string): Promise<void> {
    await people.removeTeam(await this.#db(), name);
  }
  async setTeamLimits(name: string, limits: LimitsChange): Promise<people.Team> {
    await people.setLimits(await this.#db(), 'team', name, limits);
    return (await this.team(name)) as people.Team;
  }
  /** Puts `user` in `team`, or takes them out. */
  async setMember(team: string, user: string, member: boolean): Promise<people.Team> {
    await people.setMember(await this.#db(), team, user, member);
    return (await this.team(team)) as people.Team;
  }

  /** The ids of the users who share a team with user `id`: whose work an approver of theirs decides. */
  async teammates(id: string): Promise<string[]> {
    return people.teammates(await this.#db(), id);
  }

  async createKey(k: { user: string; role: KeyRole; expiresInMs?: number; label?: string }) {
    return createKey(await this.#db(), k);
  }
  async keys(user?: string): Promise<KeyInfo[]> {
    return listKeys(await this.#db(), user);
  }
  /** Deletes user `user`'s ended keys of `label`, and revokes its live ones past the newest `keepLive`. */
  async pruneKeys(user: string, label: string, keepLive: number): Promise<void> {
    await pruneKeys(await this.#db(), user, label, keepLive);
  }
  async revokeKey(id: string): Promise<KeyInfo> {
    return revokeKey(await this.#db(), id);
  }
  /** Whose a presented key is, or why it is refused; undefined when it is not shaped as a key at all. */
  async checkKey(presented: string, now = Date.now()): Promise<KeyCheck | undefined> {
    return checkKey(await this.#db(), presented, this.#touched, now);
  }

  /** The user a person an identity provider vouches for signs in as (found, linked or made by `rule`), or 403. */
  async signIn(issuer: string, claims: Claims, rule: SignInRule): Promise<SignedIn> {
    return signInUser(await this.#db(), issuer, claims, rule);
  }
  /** User `id` as a request acting for them without a key sees them (`via` names how); undefined when removed. */
  async holderOf(id: string, role: KeyRole, via: string): Promise<KeyHolder | undefined> {
    return holderOf(await this.#db(), id, role, via);
  }

  /** Sets user `user`'s (an id) own value of a toolset's variable, sealed. */
  async setSecret(sealer: Sealer, s: { user: string; toolset: string; name: string; value: string }) {
    return secrets.setSecret(await this.#db(), sealer, s);
  }
  /** The names of user `user`'s own values (never the values). */
  async secrets(user: string): Promise<secrets.SecretInfo[]> {
    return secrets.listSecrets(await this.#db(), user);
  }
  async removeSecret(user: string, toolset: string, name: string): Promise<boolean> {
    return secrets.removeSecret(await this.#db(), user, toolset, name);
  }
  /** User `user`'s own values for `toolset`, by name. */
  async secretsFor(sealer: Sealer, user: string, toolset: string): Promise<Record<string, string>> {
    return secrets.secretsFor(await this.#db(), sealer, user, toolset);
  }

  /**
   * People's OAuth grants at toolsets' upstream servers, the gateway's clients there and the flows under way
   * (upstream-grants.ts), each sealed with `sealer`.
   */
  oauth(sealer: Sealer) {
    const db = () => this.#db();
    return {
      saveGrant: async <T>(g: { user: string; toolset: string } & grants.GrantRow<T>) =>
        grants.saveGrant(await db(), sealer, g),
      grantOf: async <T>(user: string, toolset: string) =>
        grants.grantOf<T>(await db(), sealer, user, toolset),
      dropGrant: async (user: string, toolset: string) => grants.dropGrant(await db(), user, toolset),
      clientOf: async <T>(server: string) => grants.clientOf<T>(await db(), sealer, server),
      saveClient: async <T>(server: string, client: T) =>
        grants.saveClient(await db(), sealer, server, client),
      startFlow: async <T>(f: Parameters<typeof grants.startFlow<T>>[2]) =>
        grants.startFlow(await db(), sealer, f),
      takeFlow: async <T>(stateHash: string, user: string, toolset: string) =>
        grants.takeFlow<T>(await db(), sealer, stateHash, user, toolset),
    };
  }

  /** The limits user `id`'s work counts against: theirs, then their teams'. */
  async subjectsOf(id: string): Promise<LimitSubject[]> {
    return subjectsOf(await this.#db(), id);
  }

  /** Counts one (or `amount`) of `limit` for each subject, all or none; LimitReached past one's limit. */
  async charge(subjects: readonly LimitSubject[], limit: LimitName, amount = 1, now = Date.now()) {
    if (subjects.every((s) => s.limits[limit] === undefined)) return;
    await usage.charge(await this.#db(), subjects, limit, amount, now);
  }
  /** Gives back what `charge` counted at `now` for something that did not happen (in that window, never below 0). */
  async giveBack(subjects: readonly LimitSubject[], limit: LimitName, amount: number, now: number) {
    await usage.giveBack(await this.#db(), subjects, limit, amount, now);
  }
  /** Counts what was used already (model tokens), past the limit or not. */
  async add(subjects: readonly LimitSubject[], limit: LimitName, amount: number, now = Date.now()) {
    if (subjects.every((s) => s.limits[limit] === undefined)) return;
    await usage.add(await this.#db(), subjects, limit, amount, now);
  }
  /** LimitReached when a subject used all of `limit` in this window. */
  async refuseIfSpent(subjects: readonly LimitSubject[], limit: LimitName, now = Date.now()) {
    if (subjects.every((s) => s.limits[limit] === undefined)) return;
    await usage.refuseIfSpent(await this.#db(), subjects, limit, now);
  }
  async pruneUsage(before: number): Promise<number> {
    return usage.pruneUsage(await this.#db(), before);
  }

  /** Disables toolsets for a team's members (or lifts that): the team's ceiling, inside the operator's. */
  async setTeamToolsets(team: string, ids: readonly string[], disabled: boolean): Promise<people.Team> {
    await setTeamToolsets(await this.#db(), team, ids, disabled);
    return (await this.team(team)) as people.Team;
  }
  /** Sets a team's policy overlay (YAML text the gateway checked), or takes it away (null). */
  async setTeamPolicy(team: string, text: string | null): Promise<people.Team> {
    await setTeamPolicy(await this.#db(), team, text);
    return (await this.team(team)) as people.Team;
  }
  /** The policy overlays of user `id`'s teams. */
  async teamPoliciesFor(id: string): Promise<{ team: string; text: string }[]> {
    return teamPoliciesFor(await this.#db(), id);
  }
  /** The toolsets user `id`'s teams disabled, each with the team that did. */
  async toolsetsDisabledFor(id: string): Promise<Map<string, string>> {
    return toolsetsDisabledFor(await this.#db(), id);
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.#s.close();
  }
}

/** How long a user's teams' ceiling is kept between reads (a change reaches every replica within it). */
const CEILING_CACHE_MS = 2000;

/**
 * The gateway's view of the teams' ceilings: the toolsets user `forUser` (`user:<id>`) may not use, each with its
 * team; read at most every two seconds per user (a tool call of theirs is not a read of the database each time).
 */
export function teamCeilingOf(store: IdentityStore) {
  const kept = new Map<string, { at: number; disabled: Promise<Map<string, string>> }>();
  return (forUser: string): Promise<ReadonlyMap<string, string>> => {
    const now = Date.now();
    const hit = kept.get(forUser);
    if (hit && now - hit.at < CEILING_CACHE_MS) return hit.disabled;
    if (kept.size > 10_000) kept.clear();
    const disabled = store.toolsetsDisabledFor(forUser.slice('user:'.length));
    kept.set(forUser, { at: now, disabled });
    // A failed read is not kept: the next call asks again.
    disabled.catch(() => kept.delete(forUser));
    return disabled;
  };
}

/** Where a service's identity store lives: DATABASE_URL, or identity.db in the data directory. */
export interface IdentityAt {
  databaseUrl?: string;
  dataDir: string;
}

const opened = new Map<string, { store: IdentityStore; users: number }>();

/** The identity store of `at`, shared by the services of this process; each releases it when it stops. */
export function openIdentity(
  at: IdentityAt,
  service: string,
): { store: IdentityStore; release: () => Promise<void> } {
  const where = at.databaseUrl ?? path.resolve(at.dataDir, 'identity.db');
  let entry = opened.get(where);
  if (!entry) {
    const s = at.databaseUrl
      ? postgresDbTracked<IdentityDatabase>(openPostgres(at.databaseUrl, `${service} identity`, { max: 4 }))
      : sqliteDb<IdentityDatabase>(openDatabase(where));
    entry = { store: new IdentityStore(s), users: 0 };
    opened.set(where, entry);
  }
  entry.users++;
  const held = entry;
  let released = false;
  return {
    store: held.store,
    async release() {
      if (released) return;
      released = true;
      if (--held.users > 0) return;
      opened.delete(where);
      await held.store.close();
    },
  };
}
