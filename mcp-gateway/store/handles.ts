import type { Kysely } from 'kysely';
import type { HandleQueries } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

// The statements of the MCP face's session handles (face/handles.ts keeps their rules: minting, expiry, the
// credential a handle is bound to).

export function handleQueries(db: Kysely<GatewayDatabase>): HandleQueries {
  return {
    async insert(handle, credential, at) {
      await db
        .insertInto('mcp_handles')
        .values({ handle, credential, created_at: at, last_used_at: at })
        .execute();
    },
    async get(handle) {
      const r = await db
        .selectFrom('mcp_handles')
        .select(['credential', 'last_used_at'])
        .where('handle', '=', handle)
        .executeTakeFirst();
      return r && { credential: r.credential, last_used_at: Number(r.last_used_at) };
    },
    async touch(at, handle) {
      await db.updateTable('mcp_handles').set({ last_used_at: at }).where('handle', '=', handle).execute();
    },
    async drop(handle) {
      await db.deleteFrom('mcp_handles').where('handle', '=', handle).execute();
    },
    async sweep(before) {
      const rows = await db
        .deleteFrom('mcp_handles')
        .where('last_used_at', '<', before)
        .returning('handle')
        .execute();
      return rows.map((r) => r.handle);
    },
    async count(credential) {
      const r = await db
        .selectFrom('mcp_handles')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('credential', 'is not distinct from', credential)
        .executeTakeFirstOrThrow();
      return Number(r.n);
    },
    async dropOldest(credential, n) {
      const oldest = db
        .selectFrom('mcp_handles')
        .select('handle')
        .where('credential', 'is not distinct from', credential)
        .orderBy('last_used_at')
        .limit(n);
      const rows = await db
        .deleteFrom('mcp_handles')
        .where('handle', 'in', oldest)
        .returning('handle')
        .execute();
      return rows.map((r) => r.handle);
    },
  };
}
