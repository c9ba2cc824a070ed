import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { HttpError } from '../http/http-error.ts';
import { type Limits, limitsOf } from './limits.ts';
import type { IdentityDatabase } from './schema.ts';

// Users and teams (identity_users, identity_teams, identity_members): made, listed, removed, their limits set,
// and who belongs to which team.

export type Db = Kysely<IdentityDatabase>;

export interface User {
  id: string;
  name: string;
  email: string | null;
  limits: Limits;
  teams: string[];
  created_at: string;
}

export interface Team {
  id: string;
  name: string;
  limits: Limits;
  members: string[];
  /** The toolsets its members may not use (its ceiling, inside the operator's). */
  disabled_toolsets: string[];
  /** Its policy overlay (YAML rules applied on top of the operator's policy), or null. */
  policy: string | null;
  created_at: string;
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export const newId = (prefix: string) => `${prefix}_${randomBytes(9).toString('base64url')}`;

function checkName(kind: string, name: string): void {
  if (!NAME.test(name)) {
    throw new HttpError(
      400,
      `a ${kind} name is 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit ` +
        `(got ${JSON.stringify(name.slice(0, 80))})`,
    );
  }
}

/** Limits as stored: a null (or absent) limit is none; no limits at all is a null column. */
export type LimitsChange = { [K in keyof Limits]?: number | null };

function limitsText(limits: LimitsChange | undefined): string | null {
  const kept = Object.entries(limits ?? {}).filter(([, v]) => v !== null && v !== undefined);
  return kept.length > 0 ? JSON.stringify(Object.fromEntries(kept)) : null;
}

export async function needUser(db: Db, name: string) {
  const row = await db.selectFrom('identity_users').selectAll().where('name', '=', name).executeTakeFirst();
  if (!row) throw new HttpError(404, `no user ${JSON.stringify(name)}; toolshift users list shows them`);
  return row;
}

export async function needTeam(db: Db, name: string) {
  const row = await db.selectFrom('identity_teams').selectAll().where('name', '=', name).executeTakeFirst();
  if (!row) throw new HttpError(404, `no team ${JSON.stringify(name)}; toolshift teams list shows them`);
  return row;
}

export async function addUser(
  db: Db,
  u: { name: string; email?: string; limits?: LimitsChange; teams?: string[] },
): Promise<void> {
  checkName('user', u.name);
  const taken = await db
    .selectFrom('identity_users')
    .select('id')
    .where('name', '=', u.name)
    .executeTakeFirst();
  if (taken) throw new HttpError(409, `user ${u.name} already exists`);
  const teams = await Promise.all((u.teams ?? []).map((t) => needTeam(db, t)));
  const row = {
    id: newId('usr'),
    name: u.name,
    email: u.email?.toLowerCase() ?? null,
    limits: limitsText(u.limits),
    created_at: new Date().toISOString(),
  };
  await db.transaction().execute(async (trx) => {
    await trx.insertInto('identity_users').values(row).execute();
    // Added again: a sign-in with their email may find (or make) them.
    if (row.email) await trx.deleteFrom('identity_removed').where('email', '=', row.email).execute();
    for (const t of teams) {
      await trx.insertInto('identity_members').values({ team_id: t.id, user_id: row.id }).execute();
    }
  });
}

export async function listUsers(db: Db): Promise<User[]> {
  const [rows, members] = await Promise.all([
    db.selectFrom('identity_users').selectAll().orderBy('name').execute(),
    db
      .selectFrom('identity_members as m')
      .innerJoin('identity_teams as t', 't.id', 'm.team_id')
      .select(['m.user_id', 't.name'])
      .orderBy('t.name')
      .execute(),
  ]);
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    email: r.email,
    limits: limitsOf(r.limits),
    teams: members.filter((m) => m.user_id === r.id).map((m) => m.name),
    created_at: r.created_at,
  }));
}

/** Removes a user and their memberships; their keys are revoked (and stay listed, for the audit's key ids). */
export async function removeUser(db: Db, name: string): Promise<void> {
  const row = await needUser(db, name);
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('identity_members').where('user_id', '=', row.id).execute();
    await trx.deleteFrom('identity_users').where('id', '=', row.id).execute();
    // Kept out: no sign-in makes a new user with their email (another account of theirs at the provider).
    if (row.email) {
      await trx
        .insertInto('identity_removed')
        .values({ email: row.email.toLowerCase(), removed_at: new Date().toISOString() })
        .onConflict((oc) => oc.column('email').doNothing())
        .execute();
    }
    await trx
      .updateTable('identity_keys')
      .set({ revoked_at: Date.now() })
      .where('user_id', '=', row.id)
      .where('revoked_at', 'is', null)
      .execute();
  });
}

export async function setLimits(
  db: Db,
  kind: 'user' | 'team',
  name: string,
  limits: LimitsChange,
): Promise<void> {
  if (kind === 'user') {
    const row = await needUser(db, name);
    const merged = limitsText({ ...limitsOf(row.limits), ...limits });
    await db.updateTable('identity_users').set({ limits: merged }).where('id', '=', row.id).execute();
  } else {
    const row = await needTeam(db, name);
    const merged = limitsText({ ...limitsOf(row.limits), ...limits });
    await db.updateTable('identity_teams').set({ limits: merged }).where('id', '=', row.id).execute();
  }
}

export async function addTeam(db: Db, t: { name: string; limits?: LimitsChange }): Promise<void> {
  checkName('team', t.name);
  const taken = await db
    .selectFrom('identity_teams')
    .select('id')
    .where('name', '=', t.name)
    .executeTakeFirst();
  if (taken) throw new HttpError(409, `team ${t.name} already exists`);
  await db
    .insertInto('identity_teams')
    .values({
      id: newId('team'),
      name: t.name,
      limits: limitsText(t.limits),
      created_at: new Date().toISOString(),
    })
    .execute();
}

export async function listTeams(db: Db): Promise<Team[]> {
  const [rows, members] = await Promise.all([
    db.selectFrom('identity_teams').selectAll().orderBy('name').execute(),
    db
      .selectFrom('identity_members as m')
      .innerJoin('identity_users as u', 'u.id', 'm.user_id')
      .select(['m.team_id', 'u.name'])
      .orderBy('u.name')
      .execute(),
  ]);
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    limits: limitsOf(r.limits),
    members: members.filter((m) => m.team_id === r.id).map((m) => m.name),
    disabled_toolsets: r.disabled_toolsets ? (JSON.parse(r.disabled_toolsets) as string[]) : [],
    policy: r.policy,
    created_at: r.created_at,
  }));
}

export async function removeTeam(db: Db, name: string): Promise<void> {
  const row = await needTeam(db, name);
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('identity_members').where('team_id', '=', row.id).execute();
    await trx.deleteFrom('identity_teams').where('id', '=', row.id).execute();
  });
}

/** Puts `user` in `team` (member) or takes them out. */
export async function setMember(db: Db, team: string, user: string, member: boolean): Promise<void> {
  const [t, u] = await Promise.all([needTeam(db, team), needUser(db, user)]);
  if (member) {
    await db
      .insertInto('identity_members')
      .values({ team_id: t.id, user_id: u.id })
      .onConflict((oc) => oc.doNothing())
      .execute();
  } else {
    await db.deleteFrom('identity_members').where('team_id', '=', t.id).where('user_id', '=', u.id).execute();
  }
}

/** The ids of the users who share a team with user `id` (not `id` itself). */
export async function teammates(db: Db, id: string): Promise<string[]> {
  const rows = await db
    .selectFrom('identity_members as mine')
    .innerJoin('identity_members as theirs', 'theirs.team_id', 'mine.team_id')
    .select('theirs.user_id')
    .distinct()
    .where('mine.user_id', '=', id)
    .where('theirs.user_id', '!=', id)
    .execute();
  return rows.map((r) => r.user_id);
}
