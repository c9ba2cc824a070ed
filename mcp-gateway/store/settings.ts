import type { Kysely } from 'kysely';
import { fixedChunks } from '../../lib/db/kysely.ts';
import type { DialectHooks } from './dialect.ts';
import type { GatewayDatabase } from './schema.ts';

// The operator's ceiling (which toolsets are disabled) and the user's defaults (which a new session starts
// with): read on every request, so kept in memory and dropped on any change, here or announced by another
// replica (store.ts listens), and after CACHE_MS in any case on PostgreSQL.

/** How long a PostgreSQL replica keeps the disabled set and the defaults at most, notifications or not. */
const CACHE_MS = 1000;

type Kdb = Kysely<GatewayDatabase>;

export interface Settings {
  disabled: ReadonlySet<string>;
  overrides: ReadonlyMap<string, boolean>;
}

async function readSettings(db: Kdb): Promise<Settings> {
  const [disabled, overrides] = await Promise.all([
    db.selectFrom('toolset_settings').select('toolset_id').where('enabled', '=', 0).execute(),
    db.selectFrom('toolset_defaults').select(['toolset_id', 'active']).execute(),
  ]);
  return {
    disabled: new Set(disabled.map((r) => r.toolset_id)),
    overrides: new Map(overrides.map((r) => [r.toolset_id, r.active === 1])),
  };
}

/** The disabled set and the defaults as kept, and the one way to change them (which drops what is kept). */
export function settingsCache(db: Kdb, hooks: DialectHooks) {
  let settings: Settings | null = null;
  let settingsAt = 0;
  /** Moves on every drop of the cache: a read begun before a drop is not kept. */
  let generation = 0;
  let reading: Promise<Settings> | null = null;
  const forget = () => {
    settings = null;
    reading = null;
    generation++;
  };
  /** The disabled set and the defaults as kept, read afresh when dropped or (PostgreSQL) older than CACHE_MS. */
  const current = async (): Promise<Settings> => {
    if (await hooks.changedElsewhere(db)) forget();
    if (settings && (hooks.name === 'sqlite' || Date.now() - settingsAt <= CACHE_MS)) return settings;
    if (!reading) {
      const at = generation;
      const started = Date.now();
      const read = readSettings(db);
      reading = read;
      read.then(
        (fresh) => {
          if (generation !== at) return;
          settings = fresh;
          settingsAt = started;
          reading = null;
        },
        () => {
          if (generation === at) reading = null;
        },
      );
    }
    return reading;
  };
  /** A change of the ceiling or the defaults: announced to the others; what is kept here goes. */
  const change = async (work: (trx: Kdb) => Promise<void>) => {
    try {
      await db.transaction().execute(async (trx) => {
        await work(trx);
        await hooks.notify(trx, { kind: 'settings' });
      });
    } finally {
      forget();
    }
  };
  return { forget, current, change };
}

type SettingsChange = ReturnType<typeof settingsCache>['change'];

/** The store's changes of the ceiling and the defaults, each through `change`. */
export function settingsWrites(change: SettingsChange) {
  return {
    setDefaults: (ids: readonly string[], active: boolean) =>
      change(async (trx) => {
        for (const chunk of fixedChunks(ids.map((toolset_id) => ({ toolset_id, active: active ? 1 : 0 })))) {
          await trx
            .insertInto('toolset_defaults')
            .values(chunk)
            .onConflict((oc) =>
              oc.column('toolset_id').doUpdateSet((eb) => ({ active: eb.ref('excluded.active') })),
            )
            .execute();
        }
      }),
    setEnabled: (ids: readonly string[], enabled: boolean) =>
      change(async (trx) => {
        if (ids.length === 0) return;
        for (const chunk of fixedChunks(
          ids.map((toolset_id) => ({ toolset_id, enabled: enabled ? 1 : 0 })),
        )) {
          await trx
            .insertInto('toolset_settings')
            .values(chunk)
            .onConflict((oc) =>
              oc.column('toolset_id').doUpdateSet((eb) => ({ enabled: eb.ref('excluded.enabled') })),
            )
            .execute();
        }
        if (!enabled)
          await trx
            .deleteFrom('session_toolsets')
            .where('toolset_id', 'in', [...ids])
            .execute();
      }),
    dropToolset: (toolsetId: string) =>
      change(async (trx) => {
        await trx.deleteFrom('session_toolsets').where('toolset_id', '=', toolsetId).execute();
      }),
  };
}
