import type { Db } from './people.ts';
import { boundTo, type Sealer } from './sealed.ts';

// The OAuth side of people's own upstream accounts (the gateway is the client, mcp-gateway/backends/oauth-*.ts):
// each person's grant per toolset (its tokens sealed, its scopes and expiry in the clear), the gateway's client
// registration at each authorization server (sealed), and the flows under way (single-use, expiring). What is
// sealed is JSON the caller chooses; this file keeps it bound to whose and what it is.

export interface GrantRow<T> {
  tokens: T;
  scopes: string[];
  /** When the access token expires (ms since the epoch), when the server said. */
  expires_at: number | null;
}

export async function saveGrant<T>(
  db: Db,
  sealer: Sealer,
  g: { user: string; toolset: string } & GrantRow<T>,
): Promise<void> {
  const row = {
    user_id: g.user,
    toolset: g.toolset,
    sealed: sealer.seal(JSON.stringify(g.tokens), boundTo(g.user, g.toolset, 'grant')),
    scopes: g.scopes.join(' '),
    expires_at: g.expires_at,
    updated_at: new Date().toISOString(),
  };
  await db
    .insertInto('identity_grants')
    .values(row)
    .onConflict((oc) =>
      oc.columns(['user_id', 'toolset']).doUpdateSet({
        sealed: row.sealed,
        scopes: row.scopes,
        expires_at: row.expires_at,
        updated_at: row.updated_at,
      }),
    )
    .execute();
}

/** User `user`'s grant for `toolset`, opened; undefined when there is none (or it no longer opens). */
export async function grantOf<T>(
  db: Db,
  sealer: Sealer,
  user: string,
  toolset: string,
): Promise<GrantRow<T> | undefined> {
  const row = await db
    .selectFrom('identity_grants')
    .select(['sealed', 'scopes', 'expires_at'])
    .where('user_id', '=', user)
    .where('toolset', '=', toolset)
    .executeTakeFirst();
  const plain = row && sealer.open(row.sealed, boundTo(user, toolset, 'grant'));
  if (!row || plain === undefined) return undefined;
  const expires = row.expires_at === null ? null : Number(row.expires_at);
  return {
    tokens: JSON.parse(plain) as T,
    scopes: row.scopes.split(' ').filter(Boolean),
    expires_at: expires,
  };
}

/** Drops a grant; false when there was none. */
export async function dropGrant(db: Db, user: string, toolset: string): Promise<boolean> {
  const r = await db
    .deleteFrom('identity_grants')
    .where('user_id', '=', user)
    .where('toolset', '=', toolset)
    .executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** The gateway's client at an authorization server (`server`: what it was registered for), opened. */
export async function clientOf<T>(db: Db, sealer: Sealer, server: string): Promise<T | undefined> {
  const row = await db
    .selectFrom('identity_oauth_clients')
    .select('sealed')
    .where('server', '=', server)
    .executeTakeFirst();
  const plain = row && sealer.open(row.sealed, boundTo('', server, 'client'));
  return plain === undefined ? undefined : (JSON.parse(plain) as T);
}

export async function saveClient<T>(db: Db, sealer: Sealer, server: string, client: T): Promise<void> {
  const sealed = sealer.seal(JSON.stringify(client), boundTo('', server, 'client'));
  await db
    .insertInto('identity_oauth_clients')
    .values({ server, sealed, created_at: new Date().toISOString() })
    .onConflict((oc) => oc.column('server').doUpdateSet({ sealed }))
    .execute();
}

/** The flows one person may have under way; starting another ends their oldest. */
export const MAX_FLOWS = 10;

/** A flow under way: its state's hash, whose, for which toolset, what it keeps sealed, until when (ms). */
export async function startFlow<T>(
  db: Db,
  sealer: Sealer,
  f: { stateHash: string; user: string; toolset: string; kept: T; expiresAt: number },
): Promise<void> {
  // Flows left unfinished go when a later one starts: the table holds only those still usable, a few a person.
  await db.deleteFrom('identity_oauth_flows').where('expires_at', '<', Date.now()).execute();
  const mine = await db
    .selectFrom('identity_oauth_flows')
    .select('state_hash')
    .where('user_id', '=', f.user)
    .orderBy('expires_at')
    .execute();
  const over = mine.slice(0, Math.max(0, mine.length - MAX_FLOWS + 1)).map((r) => r.state_hash);
  if (over.length > 0) await db.deleteFrom('identity_oauth_flows').where('state_hash', 'in', over).execute();
  await db
    .insertInto('identity_oauth_flows')
    .values({
      state_hash: f.stateHash,
      user_id: f.user,
      toolset: f.toolset,
      sealed: sealer.seal(JSON.stringify(f.kept), boundTo(f.user, f.toolset, f.stateHash)),
      expires_at: f.expiresAt,
    })
    .execute();
}

export type TakenFlow<T> =
  | { ok: true; toolset: string; kept: T }
  | { ok: false; why: 'unknown' | 'another_user' | 'expired' };

/**
 * Takes the flow of a state for user `user` and `toolset`, deleting it (single use): unknown (never made, or used already),
 * another user's (left in place, for its own user), or expired.
 */
export async function takeFlow<T>(
  db: Db,
  sealer: Sealer,
  stateHash: string,
  user: string,
  toolset: string,
  now = Date.now(),
): Promise<TakenFlow<T>> {
  const row = await db
    .selectFrom('identity_oauth_flows')
    .selectAll()
    .where('state_hash', '=', stateHash)
    .executeTakeFirst();
  if (!row || row.toolset !== toolset) return { ok: false, why: 'unknown' };
  if (row.user_id !== user) return { ok: false, why: 'another_user' };
  const r = await db
    .deleteFrom('identity_oauth_flows')
    .where('state_hash', '=', stateHash)
    .where('user_id', '=', user)
    .executeTakeFirst();
  // Taken by a request at the same time: that one has it.
  if (Number(r.numDeletedRows) !== 1) return { ok: false, why: 'unknown' };
  if (Number(row.expires_at) < now) return { ok: false, why: 'expired' };
  const plain = sealer.open(row.sealed, boundTo(user, row.toolset, stateHash));
  if (plain === undefined) return { ok: false, why: 'unknown' };
  return { ok: true, toolset: row.toolset, kept: JSON.parse(plain) as T };
}
