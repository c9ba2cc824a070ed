import type { Kysely } from 'kysely';
import { statement } from '../../lib/db/kysely.ts';
import type { DialectHooks } from './dialect.ts';
import type { LegacyQueries } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

// The statements of the MCP face's legacy sessions kept across restarts (face/legacy-store.ts keeps their
// rules). Only a session id's SHA-256 is stored, never the id.

export function legacyQueries(db: Kysely<GatewayDatabase>, hooks: DialectHooks): LegacyQueries {
  // Read on every request of a legacy session (another replica may have bound or ended it): compiled once.
  const get = statement(db, ['key'], (k, a: { key: string }) =>
    k
      .selectFrom('mcp_legacy_sessions')
      .select(['credential', 'own_session', 'handle', 'init', 'last_seen'])
      .where('id_hash', '=', a.key),
  );
  return {
    async save(key, r, now) {
      const values = {
        id_hash: key,
        credential: r.credential,
        own_session: r.own_session,
        handle: r.handle,
        init: r.init,
        created_at: now,
        last_seen: now,
      };
      await db
        .insertInto('mcp_legacy_sessions')
        .values(values)
        .onConflict((oc) =>
          oc.column('id_hash').doUpdateSet((eb) => ({
            credential: eb.ref('excluded.credential'),
            own_session: eb.ref('excluded.own_session'),
            handle: eb.ref('excluded.handle'),
            init: eb.ref('excluded.init'),
            created_at: eb.ref('excluded.created_at'),
            last_seen: eb.ref('excluded.last_seen'),
          })),
        )
        .execute();
    },
    async get(key) {
      const [r] = (await get(db, { key })).rows;
      return r && { ...r, last_seen: Number(r.last_seen) };
    },
    // A session bound to a handle here: the replicas holding it open hear it as a change of its own session.
    setHandle: (handle, key) =>
      db.transaction().execute(async (trx) => {
        const row = await trx
          .updateTable('mcp_legacy_sessions')
          .set({ handle })
          .where('id_hash', '=', key)
          .returning('own_session')
          .executeTakeFirst();
        if (row) await hooks.notify(trx, { kind: 'session', id: row.own_session });
      }),
    async touch(seen) {
      if (seen.length === 0) return;
      await db.transaction().execute(async (trx) => {
        for (const [key, at] of seen) {
          await trx
            .updateTable('mcp_legacy_sessions')
            .set({ last_seen: at })
            .where('id_hash', '=', key)
            .where('last_seen', '<', at)
            .execute();
        }
      });
    },
    async drop(key) {
      await db.deleteFrom('mcp_legacy_sessions').where('id_hash', '=', key).execute();
    },
    idle: (before, limit) =>
      db
        .selectFrom('mcp_legacy_sessions')
        .select(['id_hash', 'own_session'])
        .where('last_seen', '<', before)
        .orderBy('last_seen')
        .limit(limit)
        .execute(),
  };
}
