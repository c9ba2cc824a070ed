import type { Kysely } from 'kysely';
import { fixedChunks } from '../../lib/db/kysely.ts';
import type { Pin, PinnedDefinition } from '../catalog/pins.ts';
import type { DialectHooks } from './dialect.ts';
import type { GatewayDatabase } from './schema.ts';

// The upstream toolsets' last tool listings and their approved definitions (pins): what catalog/pins.ts
// compares a new listing with.

export function pinQueries(db: Kysely<GatewayDatabase>, hooks: DialectHooks) {
  return {
    async lastListing(toolsetId: string): Promise<PinnedDefinition[]> {
      const rows = await db
        .selectFrom('upstream_tools')
        .select('definition')
        .where('toolset_id', '=', toolsetId)
        .orderBy('position')
        .execute();
      return rows.map((r) => JSON.parse(r.definition) as PinnedDefinition);
    },
    saveListing: (toolsetId: string, definitions: readonly PinnedDefinition[]) =>
      db.transaction().execute(async (trx) => {
        await trx.deleteFrom('upstream_tools').where('toolset_id', '=', toolsetId).execute();
        const rows = definitions.map((d, position) => ({
          toolset_id: toolsetId,
          tool: d.name,
          position,
          definition: JSON.stringify(d),
        }));
        for (const chunk of fixedChunks(rows)) {
          await trx
            .insertInto('upstream_tools')
            .values(chunk)
            .onConflict((oc) => oc.doNothing())
            .execute();
        }
      }),
    /** The approved definitions of a toolset, or null when it has never been pinned. */
    async pins(toolsetId: string): Promise<Map<string, Pin> | null> {
      const rows = await db
        .selectFrom('pinned_toolsets as t')
        .leftJoin('tool_pins as p', 'p.toolset_id', 't.toolset_id')
        .select(['p.tool', 'p.hash', 'p.definition'])
        .where('t.toolset_id', '=', toolsetId)
        .execute();
      if (rows.length === 0) return null;
      return new Map(
        rows.flatMap((r): [string, Pin][] =>
          r.tool === null || r.hash === null || r.definition === null
            ? []
            : [[r.tool, { hash: r.hash, definition: JSON.parse(r.definition) }]],
        ),
      );
    },
    /** Approves definitions (and marks the toolset pinned: from now on, changes are held). */
    pin: (toolsetId: string, pins: readonly Pin[]) =>
      db.transaction().execute(async (trx) => {
        const now = new Date().toISOString();
        await trx
          .insertInto('pinned_toolsets')
          .values({ toolset_id: toolsetId, first_at: now })
          .onConflict((oc) => oc.doNothing())
          .execute();
        const rows = pins.map((p) => ({
          toolset_id: toolsetId,
          tool: p.definition.name,
          hash: p.hash,
          definition: JSON.stringify(p.definition),
          approved_at: now,
        }));
        for (const chunk of fixedChunks(rows)) {
          await trx
            .insertInto('tool_pins')
            .values(chunk)
            .onConflict((oc) =>
              oc.columns(['toolset_id', 'tool']).doUpdateSet((eb) => ({
                hash: eb.ref('excluded.hash'),
                definition: eb.ref('excluded.definition'),
                approved_at: eb.ref('excluded.approved_at'),
              })),
            )
            .execute();
        }
        await hooks.notify(trx, { kind: 'pins', id: toolsetId });
      }),
  };
}
