import type { Kysely } from 'kysely';
import { statement } from '../../lib/db/kysely.ts';
import type { HandleQueries } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

// The statements of the MCP face's session handles (face/handles.ts keeps their rules: minting, expiry, the
// credential a handle is bound to). A handle is checked on every call of the face: its statements are
// compiled once.

type Db = Kysely<GatewayDatabase>;

export function handleQueries(db: Db): HandleQueries {
  const q = {
    insert: statement(
      db,
      ['handle', 'credential', 'at'],
      (k, a: { handle: string; credential: string | null; at: number }) =>
        k
          .insertInto('mcp_handles')
          .values({ handle: a.handle, credential: a.credential, created_at: a.at, last_used_at: a.at }),
    ),
    get: statement(db, ['handle'], (k, a: { handle: string }) =>
      k.selectFrom('mcp_handles').select(['credential', 'last_used_at']).where('handle', '=', a.handle),
    ),
    touch: statement(db, ['handle', 'at'], (k, a: { handle: string; at: number }) =>
      k.updateTable('mcp_handles').set({ last_used_at: a.at }).where('handle', '=', a.handle),
    ),
    drop: statement(db, ['handle'], (k, a: { handle: string }) =>
      k.deleteFrom('mcp_handles').where('handle', '=', a.handle),
    ),
    sweep: statement(db, ['before'], (k, a: { before: number }) =>
      k.deleteFrom('mcp_handles').where('last_used_at', '<', a.before).returning('handle'),
    ),
    count: statement(db, ['credential'], (k, a: { credential: string | null }) =>
      k
        .selectFrom('mcp_handles')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('credential', 'is not distinct from', a.credential),
    ),
    dropOldest: statement(db, ['credential', 'n'], (k, a: { credential: string | null; n: number }) =>
      k
        .deleteFrom('mcp_handles')
        .where(
          'handle',
          'in',
          k
            .selectFrom('mcp_handles')
            .select('handle')
            .where('credential', 'is not distinct from', a.credential)
            .orderBy('last_used_at')
            .limit(a.n),
        )
        .returning('handle'),
    ),
  };
  return {
    async insert(handle, credential, at) {
      await q.insert(db, { handle, credential, at });
    },
    async get(handle) {
      const [r] = (await q.get(db, { handle })).rows;
      return r && { credential: r.credential, last_used_at: Number(r.last_used_at) };
    },
    async touch(at, handle) {
      await q.touch(db, { handle, at });
    },
    async drop(handle) {
      await q.drop(db, { handle });
    },
    sweep: async (before) => (await q.sweep(db, { before })).rows.map((r) => r.handle),
    count: async (credential) => Number((await q.count(db, { credential })).rows[0]?.n ?? 0),
    dropOldest: async (credential, n) =>
      (await q.dropOldest(db, { credential, n })).rows.map((r) => r.handle),
  };
}
