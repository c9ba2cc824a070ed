import { HttpError } from '../http/http-error.ts';
import type { Db } from './people.ts';
import { boundTo, type Sealer } from './sealed.ts';

// A user's own values of a toolset's variables (`toolshift secrets set <toolset> <NAME>`): their API key at an
// upstream, used instead of the shared `${NAME}` for their calls. Kept sealed (sealed.ts); listed by name only.

export interface SecretInfo {
  toolset: string;
  name: string;
  updated_at: string;
}

/** The most a value may hold (an API key, a token: far less). */
export const MAX_SECRET_BYTES = 8 * 1024;

export async function setSecret(
  db: Db,
  sealer: Sealer,
  s: { user: string; toolset: string; name: string; value: string },
): Promise<SecretInfo> {
  if (s.value === '' || Buffer.byteLength(s.value) > MAX_SECRET_BYTES) {
    throw new HttpError(400, `a value is 1 to ${MAX_SECRET_BYTES} bytes (got ${Buffer.byteLength(s.value)})`);
  }
  const row = {
    user_id: s.user,
    toolset: s.toolset,
    name: s.name,
    sealed: sealer.seal(s.value, boundTo(s.user, s.toolset, s.name)),
    updated_at: new Date().toISOString(),
  };
  await db
    .insertInto('identity_secrets')
    .values(row)
    .onConflict((oc) =>
      oc
        .columns(['user_id', 'toolset', 'name'])
        .doUpdateSet({ sealed: row.sealed, updated_at: row.updated_at }),
    )
    .execute();
  return { toolset: row.toolset, name: row.name, updated_at: row.updated_at };
}

export async function listSecrets(db: Db, user: string): Promise<SecretInfo[]> {
  return db
    .selectFrom('identity_secrets')
    .select(['toolset', 'name', 'updated_at'])
    .where('user_id', '=', user)
    .orderBy('toolset')
    .orderBy('name')
    .execute();
}

/** Removes one; false when there was none. */
export async function removeSecret(db: Db, user: string, toolset: string, name: string): Promise<boolean> {
  const r = await db
    .deleteFrom('identity_secrets')
    .where('user_id', '=', user)
    .where('toolset', '=', toolset)
    .where('name', '=', name)
    .executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** The user's values for a toolset, by name (a value that no longer opens, under another key, is left out). */
export async function secretsFor(db: Db, sealer: Sealer, user: string, toolset: string) {
  const rows = await db
    .selectFrom('identity_secrets')
    .select(['name', 'sealed'])
    .where('user_id', '=', user)
    .where('toolset', '=', toolset)
    .execute();
  const values: Record<string, string> = {};
  for (const r of rows) {
    const value = sealer.open(r.sealed, boundTo(user, toolset, r.name));
    if (value !== undefined) values[r.name] = value;
  }
  return values;
}
