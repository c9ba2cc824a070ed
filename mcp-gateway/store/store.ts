import { randomBytes } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { migrate, postgresDbTracked, type StoreDb, sqliteDb, statement } from '../../lib/db/kysely.ts';
import { listenPostgres, openPostgres, type Pool } from '../../lib/db/postgres.ts';
import { type Db, openDatabase } from '../../lib/db/sqlite.ts';
import type { Pin, PinnedDefinition } from '../catalog/pins.ts';
import { approvalQueries } from './approvals.ts';
import type { AuditActor, AuditEntry, AuditFilter, AuditPage, AuditRow } from './audit.ts';
import { auditTrail } from './audit-trail.ts';
import { callKeyQueries } from './call-keys.ts';
import { type DialectHooks, dialectHooks, fixedChunks, GATEWAY_CHANNEL } from './dialect.ts';
import { handleQueries } from './handles.ts';
import type { GatewayChange, GatewayState, GatewayStore, SessionChange, SessionView } from './interface.ts';
import { legacyQueries } from './legacy.ts';
import { GATEWAY_COMPONENT, gatewayMigrations } from './migrations.ts';
import type { GatewayDatabase } from './schema.ts';

export type {
  AuditActor,
  AuditEntry,
  AuditFilter,
  AuditPage,
  AuditRow,
  GatewayChange,
  GatewayState,
  GatewayStore,
};
export { GATEWAY_CHANNEL };

// The gateway's state, one implementation for both databases over Kysely (lib/db/kysely.ts): SQLite's gateway.db
// (the embedded default) or PostgreSQL (DATABASE_URL), shared by every gateway replica. The only module tree
// that speaks SQL for the gateway: sessions and their active toolsets in activation order, the operator's
// enabled/disabled ceiling, the user's defaults, the upstream tools' last listings and pins, the audit trail
// (audit-trail.ts), approvals, MCP handles, legacy MCP sessions and keyed calls (their files beside this one).
//
// Every statement is asynchronous: on PostgreSQL a statement waits on a pooled connection, never on the event
// loop, so one request waiting for a lock holds up no other. What replicas keep in memory, and how they hear of a
// change: the disabled set and the default overrides (read on every request) are cached, dropped on a
// `settings` notification from any replica, when listening (re)starts, and after a second in any case; on
// SQLite, when another connection to the file committed (its data_version). A session's toolsets are read from
// the database on each request. Every change and its notification commit together.

/** How long a PostgreSQL replica keeps the disabled set and the defaults at most, notifications or not. */
const CACHE_MS = 1000;

type Kdb = Kysely<GatewayDatabase>;

interface Settings {
  disabled: ReadonlySet<string>;
  overrides: ReadonlyMap<string, boolean>;
}

/** Where the gateway's state lives: PostgreSQL, a SQLite file, or an open SQLite handle. */
export type GatewayDatabaseAt = { databaseUrl: string } | { file: string } | { db: Db };

export interface GatewayStateOptions {
  /** Hears an audit row that could not be written. */
  onWriteError?: (err: unknown) => void;
}

/**
 * Opens the gateway's database and applies its migrations (an older database is brought to the current schema
 * first, its rows kept), then its state. PostgreSQL: a pool of connections (one of them listening, once asked).
 */
export async function openGatewayState(
  at: GatewayDatabaseAt,
  opts: GatewayStateOptions = {},
): Promise<GatewayState> {
  let pool: Pool | undefined;
  let s: StoreDb<GatewayDatabase>;
  if ('databaseUrl' in at) {
    pool = openPostgres(at.databaseUrl, 'mcp-gateway', { max: 10 });
    s = postgresDbTracked<GatewayDatabase>(pool);
  } else {
    s = sqliteDb<GatewayDatabase>('db' in at ? at.db : openDatabase(at.file));
  }
  try {
    await migrate(s, GATEWAY_COMPONENT, gatewayMigrations(s.dialect));
  } catch (err) {
    await s.close().catch(() => undefined);
    // The address is not repeated: DATABASE_URL may carry a password.
    const where = pool ? 'its PostgreSQL database (DATABASE_URL)' : 'its SQLite database (gateway.db)';
    throw new Error(`mcp-gateway cannot use ${where}: ${(err as Error).message}`, { cause: err });
  }
  return stateOn(s, opts, pool);
}

/**
 * The gateway store on an open SQLite handle, at once: its migrations are applied before its first statement
 * (for tests and tools that build a gateway of their own; the services use openGatewayState).
 */
export function createGatewayStore(db: Db, onWriteError?: (err: unknown) => void): GatewayStore {
  const s = sqliteDb<GatewayDatabase>(db);
  const ready = migrate(s, GATEWAY_COMPONENT, gatewayMigrations(s.dialect));
  // Observed here; every method waits for it and meets its failure.
  ready.catch(() => undefined);
  const { store } = stateOn(s, { onWriteError });
  const waiting = {} as Record<string, unknown>;
  for (const [name, method] of Object.entries(store) as [string, (...args: unknown[]) => unknown][]) {
    waiting[name] =
      name === 'audit'
        ? method
        : async (...args: unknown[]) => {
            await ready;
            return method(...args);
          };
  }
  return waiting as unknown as GatewayStore;
}

function stateOn(s: StoreDb<GatewayDatabase>, opts: GatewayStateOptions, pool?: Pool): GatewayState {
  /** This replica's name in its notifications, so it does not act on its own. */
  const origin = randomBytes(6).toString('base64url');
  const hooks = dialectHooks(s.dialect, origin);
  const onWriteError =
    opts.onWriteError ?? ((err: unknown) => process.emitWarning(`audit write failed: ${err}`));
  const store = gatewayStore(s, hooks, onWriteError);
  const stops = new Set<() => Promise<void>>();
  return {
    store,
    approvals: approvalQueries(s.db),
    handles: handleQueries(s.db),
    legacy: legacyQueries(s.db, hooks),
    callKeys: callKeyQueries(s.db),
    dialect: s.dialect,
    listen(onChange) {
      if (!pool) return async () => {};
      // Whatever was announced while not listening is lost: what is kept is read afresh once listening (again).
      const stop = listenPostgres(
        pool,
        [GATEWAY_CHANNEL],
        (_channel, payload) => {
          let sent: GatewayChange & { origin?: string };
          try {
            sent = JSON.parse(payload);
          } catch {
            return;
          }
          const { origin: from, ...change } = sent;
          if (from === origin) return;
          if (change.kind === 'settings') store.forget();
          onChange(change);
        },
        { onListen: store.forget },
      );
      stops.add(stop);
      return () => {
        stops.delete(stop);
        return stop();
      };
    },
    async close() {
      await Promise.all([...stops].map((stop) => stop()));
      await store.close();
    },
  };
}

/** The hot statements of sessions, each compiled once (lib/db/kysely.ts statement). */
function sessionStatements(db: Kdb) {
  return {
    toolsets: statement(db, ['id'], (q, a: { id: string }) =>
      q
        .selectFrom('sessions as s')
        .leftJoin('session_toolsets as t', 't.session_id', 's.id')
        .select('t.toolset_id')
        .where('s.id', '=', a.id)
        .orderBy('t.seq'),
    ),
    add: statement(db, ['id', 'at'], (q, a: { id: string; at: string }) =>
      q
        .insertInto('sessions')
        .values({ id: a.id, created_at: a.at })
        .onConflict((oc) => oc.doNothing()),
    ),
    // After those the session has; never one disabled, whatever this replica's cache said a moment ago.
    activate: statement(db, ['id', 'toolset'], (q, a: { id: string; toolset: string }) =>
      q
        .insertInto('session_toolsets')
        .columns(['session_id', 'toolset_id', 'seq'])
        .expression(
          q
            .selectNoFrom((eb) => [
              eb.val(a.id).as('session_id'),
              eb.val(a.toolset).as('toolset_id'),
              sql<number>`(SELECT COALESCE(MAX(seq), 0) + 1 FROM session_toolsets WHERE session_id = ${a.id})`.as(
                'seq',
              ),
            ])
            .where(({ not, exists, selectFrom }) =>
              not(
                exists(
                  selectFrom('toolset_settings')
                    .select('toolset_id')
                    .where('toolset_id', '=', a.toolset)
                    .where('enabled', '=', 0),
                ),
              ),
            ),
        )
        .onConflict((oc) => oc.doNothing())
        .returning('toolset_id'),
    ),
    deactivate: statement(db, ['id', 'toolset'], (q, a: { id: string; toolset: string }) =>
      q
        .deleteFrom('session_toolsets')
        .where('session_id', '=', a.id)
        .where('toolset_id', '=', a.toolset)
        .returning('toolset_id'),
    ),
  };
}

type SessionStatements = ReturnType<typeof sessionStatements>;

/** The session's stored toolsets in activation order, or null for a session never stored. */
async function storedToolsets(q: SessionStatements, db: Kdb, sessionId: string): Promise<string[] | null> {
  const { rows } = await q.toolsets(db, { id: sessionId });
  if (rows.length === 0) return null;
  return rows.flatMap((r) => (r.toolset_id === null ? [] : [r.toolset_id]));
}

/** Stores a session never stored, with `initial` active (those enabled); true when it was stored now. */
async function ensureSession(
  q: SessionStatements,
  trx: Kdb,
  sessionId: string,
  initial: readonly string[],
): Promise<boolean> {
  const res = await q.add(trx, { id: sessionId, at: new Date().toISOString() });
  if (Number(res.numAffectedRows ?? 0) === 0) return false;
  await addToolsets(q, trx, sessionId, initial);
  return true;
}

/** Adds toolsets to a session in the given order after those it has; the ids added. */
async function addToolsets(
  q: SessionStatements,
  trx: Kdb,
  sessionId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  const added = new Set<string>();
  for (const id of ids) {
    const { rows } = await q.activate(trx, { id: sessionId, toolset: id });
    if (rows[0]) added.add(rows[0].toolset_id);
  }
  return added;
}

function gatewayStore(
  s: StoreDb<GatewayDatabase>,
  hooks: DialectHooks,
  onWriteError: (err: unknown) => void,
) {
  const { db } = s;
  const trail = auditTrail(db, hooks, onWriteError);
  const q = sessionStatements(db);

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
  const readSettings = async (): Promise<Settings> => {
    const [disabled, overrides] = await Promise.all([
      db.selectFrom('toolset_settings').select('toolset_id').where('enabled', '=', 0).execute(),
      db.selectFrom('toolset_defaults').select(['toolset_id', 'active']).execute(),
    ]);
    return {
      disabled: new Set(disabled.map((r) => r.toolset_id)),
      overrides: new Map(overrides.map((r) => [r.toolset_id, r.active === 1])),
    };
  };
  /** The disabled set and the defaults as kept, read afresh when dropped or (PostgreSQL) older than CACHE_MS. */
  const currentSettings = async (): Promise<Settings> => {
    if (await hooks.changedElsewhere(db)) forget();
    if (settings && (hooks.name === 'sqlite' || Date.now() - settingsAt <= CACHE_MS)) return settings;
    if (!reading) {
      const at = generation;
      const started = Date.now();
      const read = readSettings();
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
  const settingsChange = async (work: (trx: Kdb) => Promise<void>) => {
    try {
      await db.transaction().execute(async (trx) => {
        await work(trx);
        await hooks.notify(trx, { kind: 'settings' });
      });
    } finally {
      forget();
    }
  };
  /** A change of a session's toolsets in one short transaction, announced when it changed anything. */
  const sessionChange = (
    sessionId: string,
    initial: readonly string[],
    work: (trx: Kdb) => Promise<Set<string>>,
    ids: readonly string[],
  ): Promise<SessionChange> =>
    db.transaction().execute(async (trx) => {
      const created = await ensureSession(q, trx, sessionId, initial);
      const changed = await work(trx);
      const toolsets = (await storedToolsets(q, trx, sessionId)) ?? [];
      if (created || changed.size > 0) await hooks.notify(trx, { kind: 'session', id: sessionId });
      return { changed: ids.filter((id) => changed.has(id)), toolsets };
    });

  const store = {
    /** Drops the disabled set and the defaults kept (another replica changed them). */
    forget,
    async load(sessionId: string | null): Promise<SessionView> {
      const [kept, toolsets] = await Promise.all([
        currentSettings(),
        sessionId === null ? null : storedToolsets(q, db, sessionId),
      ]);
      return { toolsets, disabled: kept.disabled, overrides: kept.overrides };
    },
    activate: (sessionId: string, ids: readonly string[], initial: readonly string[]) =>
      sessionChange(
        sessionId,
        initial,
        async (trx) => {
          // The session's row is locked first: two replicas activating in one session at once number in turn.
          await hooks.lockSession(trx, sessionId);
          return addToolsets(q, trx, sessionId, ids);
        },
        ids,
      ),
    deactivate: (sessionId: string, ids: readonly string[], initial: readonly string[]) =>
      sessionChange(
        sessionId,
        initial,
        async (trx) => {
          const removed = new Set<string>();
          for (const id of ids) {
            const { rows } = await q.deactivate(trx, { id: sessionId, toolset: id });
            if (rows[0]) removed.add(rows[0].toolset_id);
          }
          return removed;
        },
        ids,
      ),
    setDefaults: (ids: readonly string[], active: boolean) =>
      settingsChange(async (trx) => {
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
      settingsChange(async (trx) => {
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
    async dropSessions(ids: readonly string[]): Promise<void> {
      if (ids.length === 0) return;
      // session_toolsets go with them (ON DELETE CASCADE).
      await db
        .deleteFrom('sessions')
        .where('id', 'in', [...ids])
        .execute();
    },
    dropToolset: (toolsetId: string) =>
      settingsChange(async (trx) => {
        await trx.deleteFrom('session_toolsets').where('toolset_id', '=', toolsetId).execute();
      }),
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
    audit: (entry: AuditEntry, actor: AuditActor) => trail.audit(entry, actor),
    listAudit: (filter: AuditFilter): Promise<AuditPage> => trail.listAudit(filter),
    pruneAudit: (before: string, limit: number) => trail.pruneAudit(before, limit),
    pruneAuditOverflow: (maxRows: number, limit: number) => trail.pruneAuditOverflow(maxRows, limit),
    /**
     * Deletes at most `limit` sessions idle since `before` (ISO): created before it, with no audited activity
     * since (every change and call is audited), no MCP handle and no pending approval. Their next use starts
     * from the default toolsets, as a new session does. One statement: a session another replica uses meanwhile
     * is judged with its rows as they are then (and one it holds is skipped).
     */
    async pruneIdleSessions(before: string, limit: number): Promise<number> {
      // Activity since `before` is a row at or after the first id written since then: one seek in
      // audit_session, however many rows the session has.
      const since = (await trail.firstSince(before)) ?? Number.MAX_SAFE_INTEGER;
      const idle = db
        .selectFrom('sessions as s')
        .select('s.id')
        .where('s.created_at', '<', before)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('audit as a')
                .select('a.id')
                .whereRef('a.session_id', '=', 's.id')
                .where('a.id', '>=', since),
            ),
          ),
        )
        .where(({ not, exists, selectFrom }) =>
          not(exists(selectFrom('mcp_handles as h').select('h.handle').whereRef('h.handle', '=', 's.id'))),
        )
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('approvals as p')
                .select('p.id')
                .whereRef('p.session_id', '=', 's.id')
                .where('p.status', '=', 'pending'),
            ),
          ),
        )
        .limit(limit)
        .$if(hooks.skipLocked, (q) => q.forUpdate().skipLocked());
      const res = await db.deleteFrom('sessions').where('id', 'in', idle).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
    flush: () => trail.flush(),
    async close(): Promise<void> {
      await trail.close();
      await s.close();
    },
  };
  return store satisfies GatewayStore & { forget(): void };
}
