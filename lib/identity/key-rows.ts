import { HttpError } from '../http/http-error.ts';
import { KEY_ROLES, type KeyRole, keyIdOf, keyMatches, mintKey } from './keys.ts';
import { type LimitSubject, limitsOf } from './limits.ts';
import { type Db, needUser } from './people.ts';

// API keys' rows (identity_keys): made (the key shown once, its hash kept), listed, revoked, and a presented key
// checked: whose it is, or why it is refused.

export interface KeyInfo {
  id: string;
  user: string;
  role: KeyRole;
  label: string | null;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

/** Who a key belongs to, as a request acting with it sees them. */
export interface KeyHolder {
  keyId: string;
  role: KeyRole;
  user: { id: string; name: string };
  /** The user's limits and their teams', the user's first. */
  subjects: LimitSubject[];
  /** The ids of the user's teams. */
  teams: string[];
}

/** A key presented: who holds it, or why it is refused (a sentence for the 401). */
export type KeyCheck = { holder: KeyHolder } | { refused: string };

/** How often a key's last use is written at most (listings show it to the minute). */
const TOUCH_MS = 60_000;

const iso = (ms: unknown) => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString());

/** A key's row as read (BIGINTs as numbers or text), with its user's name (null: removed). */
interface KeyRow {
  id: string;
  role: string;
  label: string | null;
  created_at: string;
  expires_at: number | string | null;
  last_used_at: number | string | null;
  revoked_at: number | string | null;
  user: string | null;
}

const infoOf = (r: KeyRow): KeyInfo => ({
  id: r.id,
  user: r.user ?? '(removed)',
  role: r.role as KeyRole,
  label: r.label,
  created_at: r.created_at,
  expires_at: iso(r.expires_at),
  last_used_at: iso(r.last_used_at),
  revoked_at: iso(r.revoked_at),
});

/** A new key for `user`: the whole key is in this answer only. */
export async function createKey(
  db: Db,
  k: { user: string; role: KeyRole; expiresInMs?: number; label?: string },
): Promise<KeyInfo & { key: string }> {
  if (!KEY_ROLES.includes(k.role)) {
    throw new HttpError(
      400,
      `a key's role is one of ${KEY_ROLES.join(', ')} (got ${JSON.stringify(k.role)})`,
    );
  }
  const u = await needUser(db, k.user);
  const minted = mintKey();
  const now = Date.now();
  const row = {
    id: minted.id,
    hash: minted.hash,
    user_id: u.id,
    role: k.role,
    label: k.label ?? null,
    created_at: new Date(now).toISOString(),
    expires_at: k.expiresInMs === undefined ? null : now + k.expiresInMs,
  };
  await db.insertInto('identity_keys').values(row).execute();
  return { ...infoOf({ ...row, last_used_at: null, revoked_at: null, user: u.name }), key: minted.key };
}

export async function listKeys(db: Db, user?: string): Promise<KeyInfo[]> {
  const rows = await db
    .selectFrom('identity_keys as k')
    .leftJoin('identity_users as u', 'u.id', 'k.user_id')
    .select(['k.id', 'k.user_id', 'k.role', 'k.label', 'k.created_at', 'k.expires_at', 'k.last_used_at'])
    .select(['k.revoked_at', 'u.name as user'])
    .$if(user !== undefined, (q) => q.where('u.name', '=', user as string))
    .orderBy('k.created_at')
    .execute();
  return rows.map(infoOf);
}

export async function revokeKey(db: Db, id: string): Promise<KeyInfo> {
  await db
    .updateTable('identity_keys')
    .set({ revoked_at: Date.now() })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .execute();
  const found = (await listKeys(db)).find((k) => k.id === id);
  if (!found) throw new HttpError(404, `no key ${JSON.stringify(id)}; toolshift keys list shows them`);
  return found;
}

/**
 * Tidies a user's keys of `label` (the console's sign-ins): those revoked or expired are deleted, and of the live
 * ones only the newest `keepLive` stay live (the older are revoked).
 */
export async function pruneKeys(db: Db, user: string, label: string, keepLive: number, now = Date.now()) {
  const u = await needUser(db, user);
  await db
    .deleteFrom('identity_keys')
    .where('user_id', '=', u.id)
    .where('label', '=', label)
    .where((eb) => eb.or([eb('revoked_at', 'is not', null), eb('expires_at', '<=', now)]))
    .execute();
  const live = await db
    .selectFrom('identity_keys')
    .select('id')
    .where('user_id', '=', u.id)
    .where('label', '=', label)
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .execute();
  const older = live.slice(keepLive).map((k) => k.id);
  if (older.length > 0) {
    await db.updateTable('identity_keys').set({ revoked_at: now }).where('id', 'in', older).execute();
  }
}

/** The holder of a presented key, or why it is refused; undefined when it is not shaped as a key. */
export async function checkKey(
  db: Db,
  presented: string,
  touched: Map<string, number>,
  now = Date.now(),
): Promise<KeyCheck | undefined> {
  const id = keyIdOf(presented);
  if (id === undefined) return undefined;
  const row = await db
    .selectFrom('identity_keys as k')
    .leftJoin('identity_users as u', 'u.id', 'k.user_id')
    .select(['k.id', 'k.hash', 'k.role', 'k.expires_at', 'k.revoked_at', 'u.id as uid', 'u.name', 'u.limits'])
    .where('k.id', '=', id)
    .executeTakeFirst();
  // The same answer for no such key and a wrong secret: an id alone opens nothing and tells nothing.
  if (!row || !keyMatches(presented, row.hash)) return { refused: 'Invalid credentials: no such key' };
  const refused = refusal(id, row, now);
  if (refused) return { refused };
  const uid = row.uid as string;
  const user = { id: uid, name: row.name as string };
  const teams = await teamsOf(db, uid);
  if ((touched.get(id) ?? 0) + TOUCH_MS <= now) {
    touched.set(id, now);
    if (touched.size > 10_000) touched.clear();
    await db.updateTable('identity_keys').set({ last_used_at: now }).where('id', '=', id).execute();
  }
  return {
    holder: {
      keyId: id,
      role: row.role as KeyRole,
      user,
      subjects: subjects(user, row.limits, teams),
      teams: teams.map((t) => t.id),
    },
  };
}

/**
 * The holder a request acting for user `uid` without a key is (an access token of the MCP endpoint's
 * authorization server): `via` stands where a key's id would, in messages and the audit.
 */
export async function holderOf(
  db: Db,
  uid: string,
  role: KeyRole,
  via: string,
): Promise<KeyHolder | undefined> {
  const row = await db
    .selectFrom('identity_users')
    .select(['id', 'name', 'limits'])
    .where('id', '=', uid)
    .executeTakeFirst();
  if (!row) return undefined;
  const teams = await teamsOf(db, uid);
  const user = { id: row.id, name: row.name };
  return {
    keyId: via,
    role,
    user,
    subjects: subjects(user, row.limits, teams),
    teams: teams.map((t) => t.id),
  };
}

const teamsOf = (db: Db, uid: string) =>
  db
    .selectFrom('identity_members as m')
    .innerJoin('identity_teams as t', 't.id', 'm.team_id')
    .select(['t.id', 't.name', 't.limits'])
    .where('m.user_id', '=', uid)
    .orderBy('t.name')
    .execute();

/** The user's limits, then each of their teams'. */
function subjects(
  user: { id: string; name: string },
  limits: string | null,
  teams: { id: string; name: string; limits: string | null }[],
): LimitSubject[] {
  return [
    { key: `user:${user.id}`, label: `user ${user.name}`, limits: limitsOf(limits) },
    ...teams.map((t) => ({ key: `team:${t.id}`, label: `team ${t.name}`, limits: limitsOf(t.limits) })),
  ];
}

/** The limits a user's work counts against (none for a user who was removed). */
export async function subjectsOf(db: Db, uid: string): Promise<LimitSubject[]> {
  const row = await db
    .selectFrom('identity_users')
    .select(['id', 'name', 'limits'])
    .where('id', '=', uid)
    .executeTakeFirst();
  if (!row) return [];
  return subjects(row, row.limits, await teamsOf(db, uid));
}

/** Why a known key is refused: its user removed, revoked, expired; undefined when it holds. */
function refusal(
  id: string,
  row: { uid: string | null; revoked_at: unknown; expires_at: unknown },
  now: number,
): string | undefined {
  if (row.uid === null) return `Invalid credentials: key ${id} belongs to a user who was removed`;
  if (row.revoked_at !== null) return `Invalid credentials: key ${id} was revoked at ${iso(row.revoked_at)}`;
  if (row.expires_at !== null && Number(row.expires_at) <= now) {
    return `Invalid credentials: key ${id} expired at ${iso(row.expires_at)}`;
  }
  return undefined;
}
