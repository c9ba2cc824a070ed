import { randomBytes } from 'node:crypto';
import { migrate, postgresDbTracked, type StoreDb, sqliteDb } from '../../lib/db/kysely.ts';
import { listenPostgres, openPostgres, type Pool } from '../../lib/db/postgres.ts';
import { type Db, openDatabase } from '../../lib/db/sqlite.ts';
import { approvalQueries } from './approvals.ts';
import type { AuditActor, AuditEntry, AuditFilter, AuditPage, AuditRow } from './audit.ts';
import { auditTrail } from './audit-trail.ts';
import { callKeyQueries } from './call-keys.ts';
import { type DialectHooks, dialectHooks, GATEWAY_CHANNEL } from './dialect.ts';
import { handleQueries } from './handles.ts';
import type { GatewayChange, GatewayState, GatewayStore, SessionView } from './interface.ts';
import { learnedKeywordQueries } from './learned-keywords.ts';
import { legacyQueries } from './legacy.ts';
import { GATEWAY_COMPONENT, gatewayMigrations } from './migrations.ts';
import { pinQueries } from './pins.ts';
import type { GatewayDatabase } from './schema.ts';
import { pruneIdleSessions, sessionStatements, sessionWrites, storedToolsets } from './sessions.ts';
import { settingsCache, settingsWrites } from './settings.ts';

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
// that speaks SQL for the gateway: sessions and their active toolsets in activation order (sessions.ts), the
// operator's enabled/disabled ceiling and the user's defaults (settings.ts), the upstream tools' last listings
// and pins (pins.ts), the audit trail (audit-trail.ts), approvals, MCP handles, legacy MCP sessions and keyed
// calls (their files beside this one); this file opens the database and puts them together.
//
// Every statement is asynchronous: on PostgreSQL a statement waits on a pooled connection, never on the event
// loop, so one request waiting for a lock holds up no other. What replicas keep in memory, and how they hear of a
// change: the disabled set and the default overrides (read on every request) are cached, dropped on a
// `settings` notification from any replica, when listening (re)starts, and after a second in any case; on
// SQLite, when another connection to the file committed (its data_version). A session's toolsets are read from
// the database on each request. Every change and its notification commit together.

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
    listen(onChange, listenOpts = {}) {
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
        {
          onListen: () => {
            store.forget();
            listenOpts.onListen?.();
          },
        },
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

function gatewayStore(
  s: StoreDb<GatewayDatabase>,
  hooks: DialectHooks,
  onWriteError: (err: unknown) => void,
) {
  const { db } = s;
  const trail = auditTrail(db, hooks, onWriteError);
  const q = sessionStatements(db);
  const settings = settingsCache(db, hooks);
  const store = {
    /** Drops the disabled set and the defaults kept (another replica changed them). */
    forget: settings.forget,
    async load(sessionId: string | null): Promise<SessionView> {
      const [kept, stored] = await Promise.all([
        settings.current(),
        sessionId === null ? null : storedToolsets(q, db, sessionId),
      ]);
      return {
        toolsets: stored?.toolsets ?? null,
        only: stored?.only ?? new Map(),
        disabled: kept.disabled,
        overrides: kept.overrides,
      };
    },
    ...sessionWrites(db, hooks, q),
    ...settingsWrites(settings.change),
    ...pinQueries(db, hooks),
    ...learnedKeywordQueries(db),
    audit: (entry: AuditEntry, actor: AuditActor) => trail.audit(entry, actor),
    listAudit: (filter: AuditFilter): Promise<AuditPage> => trail.listAudit(filter),
    pruneAudit: (before: string, limit: number) => trail.pruneAudit(before, limit),
    pruneAuditOverflow: (maxRows: number, limit: number) => trail.pruneAuditOverflow(maxRows, limit),
    pruneIdleSessions: (before: string, limit: number) =>
      pruneIdleSessions(db, hooks, trail.firstSince, before, limit),
    flush: () => trail.flush(),
    async close(): Promise<void> {
      await trail.close();
      await s.close();
    },
  };
  return store satisfies GatewayStore & { forget(): void };
}
