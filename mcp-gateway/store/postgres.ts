import { randomBytes } from 'node:crypto';
import { listenPostgres, migratePostgres, openPostgres } from '../../lib/postgres.ts';
import { openSyncPostgres, type SyncPostgres } from '../../lib/postgres-sync.ts';
import type { Pin, PinnedDefinition } from '../catalog/pins.ts';
import type { ApprovalQueries, ApprovalRow } from '../ceiling/approvals.ts';
import { currentActor } from '../core/audit-context.ts';
import type { HandleQueries } from '../face/handles.ts';
import type { LegacyQueries, LegacyRow } from '../face/legacy-store.ts';
import {
  AUDIT_DETAIL_MAX,
  AUDIT_SUBJECT_MAX,
  type AuditEntry,
  type AuditFilter,
  type AuditPage,
  type AuditRow,
  auditConditions,
  clip,
  LISTED_DETAIL_MAX,
  LISTED_SUBJECT_MAX,
} from './audit.ts';
import type { CallKeyQueries } from './call-keys.ts';
import type { GatewayStore } from './interface.ts';
import { CALL_KEYS_MIGRATION, postgresCallKeyQueries } from './postgres-call-keys.ts';

// The gateway's state in PostgreSQL (DATABASE_URL), shared by every gateway replica: sessions and their active
// toolsets, the operator's ceiling, the user's defaults, upstream listings and pins, approvals, MCP handles,
// legacy MCP sessions and the audit trail. The gateway's rules are written against a synchronous store (the
// SQLite one), so statements go through lib/postgres-sync.ts: the caller waits for the round trip (about
// 0.15 ms on loopback) as it waits for SQLite's disk.
//
// What replicas keep in memory, and how they hear of a change: the disabled set and the default overrides
// (read on every request) are cached and dropped when a `settings` notification arrives from any replica;
// a session's active toolsets are read from the database on each request (an agent's next request may reach
// another replica than its last change did, and must see it); a change of pins or of a session is announced
// so other replicas re-read pins and tell their MCP clients (list_changed). Every change and its notification
// commit together.

/** The channel replicas announce their changes on. */
export const GATEWAY_CHANNEL = 'toolshift_gateway';

export const MIGRATIONS = [
  `CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
   CREATE INDEX sessions_created ON sessions (created_at);
   CREATE TABLE session_toolsets (
     session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
     toolset_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     PRIMARY KEY (session_id, toolset_id));
   CREATE INDEX session_toolsets_toolset ON session_toolsets (toolset_id);
   CREATE TABLE toolset_settings (toolset_id TEXT PRIMARY KEY, enabled BOOLEAN NOT NULL);
   CREATE TABLE toolset_defaults (toolset_id TEXT PRIMARY KEY, active BOOLEAN NOT NULL);
   CREATE TABLE audit (
     id BIGSERIAL PRIMARY KEY, at TEXT NOT NULL, session_id TEXT, task_id TEXT, actor TEXT,
     kind TEXT NOT NULL, subject TEXT NOT NULL, ok BOOLEAN NOT NULL, detail TEXT);
   CREATE INDEX audit_session ON audit (session_id, id);
   CREATE INDEX audit_task ON audit (task_id, id);
   CREATE INDEX audit_at ON audit (at);
   CREATE TABLE upstream_tools (
     toolset_id TEXT NOT NULL, tool TEXT NOT NULL, position INTEGER NOT NULL, definition TEXT NOT NULL,
     PRIMARY KEY (toolset_id, tool));
   CREATE TABLE pinned_toolsets (toolset_id TEXT PRIMARY KEY, first_at TEXT NOT NULL);
   CREATE TABLE tool_pins (
     toolset_id TEXT NOT NULL, tool TEXT NOT NULL, hash TEXT NOT NULL, definition TEXT NOT NULL,
     approved_at TEXT NOT NULL, PRIMARY KEY (toolset_id, tool));
   CREATE TABLE approvals (
     id TEXT PRIMARY KEY, session_id TEXT NOT NULL, task_id TEXT, kind TEXT NOT NULL, subject TEXT NOT NULL,
     arguments TEXT, args_hash TEXT NOT NULL, reason TEXT NOT NULL, status TEXT NOT NULL,
     created_at BIGINT NOT NULL, decided_at BIGINT, decided_by TEXT, decision_reason TEXT);
   CREATE INDEX approvals_key ON approvals (session_id, kind, subject, args_hash, status);
   CREATE TABLE mcp_handles (
     handle TEXT PRIMARY KEY, credential TEXT, created_at BIGINT NOT NULL, last_used_at BIGINT NOT NULL);
   CREATE INDEX mcp_handles_credential ON mcp_handles (credential, last_used_at);
   CREATE TABLE mcp_legacy_sessions (
     id_hash TEXT PRIMARY KEY, credential TEXT, own_session TEXT NOT NULL, handle TEXT, init TEXT NOT NULL,
     created_at BIGINT NOT NULL, last_seen BIGINT NOT NULL);
   CREATE INDEX mcp_legacy_sessions_seen ON mcp_legacy_sessions (last_seen);`,
  // One pending approval per request, whichever replica asks: a second ask finds the first.
  `UPDATE approvals a SET status = 'expired', decided_at = a.created_at WHERE a.status = 'pending' AND EXISTS (
     SELECT 1 FROM approvals b WHERE b.status = 'pending' AND b.session_id = a.session_id AND b.kind = a.kind
     AND b.subject = a.subject AND b.args_hash = a.args_hash AND (b.created_at, b.id) < (a.created_at, a.id));
   CREATE UNIQUE INDEX approvals_one_pending ON approvals (session_id, kind, subject, args_hash)
     WHERE status = 'pending';`,
  // The audit listing searches by actor and by kind too.
  `CREATE INDEX audit_actor ON audit (actor, id);
   CREATE INDEX audit_kind ON audit (kind, id);`,
  // Keyed calls and the tasks' fences (store/call-keys.ts).
  CALL_KEYS_MIGRATION,
];

/** What another replica changed: the ceiling or defaults, a session's toolsets, a toolset's pins. */
export type GatewayChange =
  | { kind: 'settings' }
  | { kind: 'session'; id: string }
  | { kind: 'pins'; id: string };

/** The gateway's stores on PostgreSQL, and the changes other replicas make. */
export interface PostgresGatewayState {
  store: GatewayStore;
  approvals: ApprovalQueries;
  handles: HandleQueries;
  legacy: LegacyQueries;
  callKeys: CallKeyQueries;
  /** Hears other replicas' changes (after this replica's caches took them in); returns the stop. */
  listen(onChange: (change: GatewayChange) => void): () => Promise<void>;
  close(): Promise<void>;
}

/** How long a replica keeps the disabled set and the defaults at most, notifications or not. */
const CACHE_MS = 1000;

/** The most audit rows written in one statement. */
const AUDIT_BATCH = 500;
/** How long audit rows wait to be written together. */
const AUDIT_DELAY_MS = 5;

/**
 * Applies the gateway's migrations to `url` and opens its stores: one synchronous connection for the
 * gateway's statements, and a small pool for the migrations and for listening.
 */
export async function openPostgresGatewayState(
  url: string,
  opts: { onWriteError?: (err: unknown) => void } = {},
): Promise<PostgresGatewayState> {
  const pool = openPostgres(url, 'mcp-gateway', { max: 2 });
  try {
    await migratePostgres(pool, 'mcp-gateway', MIGRATIONS);
  } catch (err) {
    await pool.end();
    throw err;
  }
  const db = openSyncPostgres(url, 'mcp-gateway');
  /** This replica's name in its notifications, so it does not act on its own. */
  const origin = randomBytes(6).toString('base64url');
  const notify = (change: GatewayChange) => {
    let payload = JSON.stringify({ origin, ...change });
    // Ids are bounded by the contracts; one that would not fit a notification tells everyone to read afresh.
    if (Buffer.byteLength(payload) > 7900) payload = JSON.stringify({ origin, kind: 'settings' });
    db.query('SELECT pg_notify($1, $2)', [GATEWAY_CHANNEL, payload]);
  };
  const store = postgresGatewayStore(db, notify, opts.onWriteError);
  const stops = new Set<() => Promise<void>>();
  return {
    store,
    approvals: postgresApprovalQueries(db),
    handles: postgresHandleQueries(db),
    legacy: postgresLegacyQueries(db, notify),
    callKeys: postgresCallKeyQueries(db),
    listen(onChange) {
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
      store.close();
      await pool.end();
    },
  };
}

interface StoredAudit {
  id: string;
  at: string;
  session_id: string | null;
  task_id: string | null;
  actor: string | null;
  kind: string;
  subject: string;
  subject_length: number;
  ok: boolean;
  detail: string | null;
  detail_length: number | null;
}

function postgresGatewayStore(
  db: SyncPostgres,
  notify: (change: GatewayChange) => void,
  onWriteError: (err: unknown) => void = (err) => process.emitWarning(`audit write failed: ${err}`),
): GatewayStore & { forget(): void } {
  let disabled: ReadonlySet<string> | null = null;
  let overrides: ReadonlyMap<string, boolean> | null = null;
  let readAt = 0;
  const forget = () => {
    disabled = null;
    overrides = null;
  };
  /** The cache as kept: dropped on a notification, and read afresh at least every CACHE_MS whatever was heard. */
  const fresh = () => {
    const now = Date.now();
    if (now - readAt > CACHE_MS) {
      forget();
      readAt = now;
    }
  };
  /** A change of the ceiling or the defaults: cached here, announced to the others. */
  const settingsChange = <T>(work: () => T): T => {
    try {
      return db.transaction(() => {
        const result = work();
        notify({ kind: 'settings' });
        return result;
      });
    } finally {
      forget();
    }
  };
  /** A change of a session's toolsets, announced to the others when `changed` says it changed anything. */
  const sessionChange = <T>(id: string, work: () => T, changed: (result: T) => boolean): T =>
    db.transaction(() => {
      const result = work();
      if (changed(result)) notify({ kind: 'session', id });
      return result;
    });
  /** Toolsets a session may hold: never one disabled, whatever this replica's cache said a moment ago. */
  const ENABLED = 'NOT EXISTS (SELECT 1 FROM toolset_settings s WHERE s.toolset_id = t.id AND NOT s.enabled)';

  const pending: unknown[][] = [];
  let timer: NodeJS.Timeout | null = null;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    while (pending.length > 0) {
      const rows = pending.splice(0, AUDIT_BATCH);
      // One statement for the batch: a column per field, unnested together.
      const columns = rows[0].map((_, i) => rows.map((r) => r[i]));
      try {
        db.run(
          `INSERT INTO audit (at, session_id, kind, subject, ok, detail, actor, task_id)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::text[],
             $7::text[], $8::text[])`,
          columns,
        );
      } catch (err) {
        onWriteError(err);
      }
    }
  };
  const auditPage = (where: string) =>
    `SELECT id, at, session_id, task_id, actor, kind, substr(subject, 1, ${LISTED_SUBJECT_MAX}) AS subject,
       length(subject) AS subject_length, ok, substr(detail, 1, ${LISTED_DETAIL_MAX}) AS detail,
       length(detail) AS detail_length
     FROM audit WHERE ${where} id < $1 AND id >= $2 ORDER BY id DESC LIMIT $3`;
  const firstSince = (at: string) =>
    db.query<{ id: string }>('SELECT id FROM audit WHERE at >= $1 ORDER BY at, id LIMIT 1', [at])[0]?.id;
  const dropSessions = (ids: readonly string[]) => {
    if (ids.length > 0) db.run('DELETE FROM sessions WHERE id = ANY($1)', [ids]);
  };

  return {
    forget,
    ensureSession: (sessionId, defaults) =>
      sessionChange(
        sessionId,
        () => {
          const created =
            db.run('INSERT INTO sessions (id, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
              sessionId,
              new Date().toISOString(),
            ]) > 0;
          if (created && defaults.length > 0) {
            db.run(
              `INSERT INTO session_toolsets (session_id, toolset_id, seq)
               SELECT $1, t.id, t.n FROM unnest($2::text[]) WITH ORDINALITY AS t(id, n) WHERE ${ENABLED}
               ON CONFLICT DO NOTHING`,
              [sessionId, defaults],
            );
          }
          return created;
        },
        (created) => created,
      ),
    activeToolsets(sessionId) {
      const rows = db.query<{ toolset_id: string | null }>(
        `SELECT t.toolset_id FROM sessions s LEFT JOIN session_toolsets t ON t.session_id = s.id
         WHERE s.id = $1 ORDER BY t.seq`,
        [sessionId],
      );
      if (rows.length === 0) return null;
      return rows.flatMap((r) => (r.toolset_id === null ? [] : [r.toolset_id]));
    },
    activate: (sessionId, ids) =>
      sessionChange(
        sessionId,
        () => {
          // The session's row is locked first: two replicas activating in one session at once number in turn.
          db.query('SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE', [sessionId]);
          const added = new Set(
            db
              .query<{ toolset_id: string }>(
                `INSERT INTO session_toolsets (session_id, toolset_id, seq)
                 SELECT $1, t.id, (SELECT COALESCE(MAX(seq), 0) FROM session_toolsets WHERE session_id = $1) + t.n
                 FROM unnest($2::text[]) WITH ORDINALITY AS t(id, n) WHERE ${ENABLED}
                 ON CONFLICT DO NOTHING RETURNING toolset_id`,
                [sessionId, ids],
              )
              .map((r) => r.toolset_id),
          );
          return ids.filter((id) => added.has(id));
        },
        (added) => added.length > 0,
      ),
    deactivate: (sessionId, ids) =>
      sessionChange(
        sessionId,
        () => {
          const removed = new Set(
            db
              .query<{ toolset_id: string }>(
                'DELETE FROM session_toolsets WHERE session_id = $1 AND toolset_id = ANY($2) RETURNING toolset_id',
                [sessionId, ids],
              )
              .map((r) => r.toolset_id),
          );
          return ids.filter((id) => removed.has(id));
        },
        (removed) => removed.length > 0,
      ),
    disabledToolsets() {
      fresh();
      disabled ??= new Set(
        db
          .query<{ toolset_id: string }>('SELECT toolset_id FROM toolset_settings WHERE NOT enabled')
          .map((r) => r.toolset_id),
      );
      return disabled;
    },
    defaultOverrides() {
      fresh();
      overrides ??= new Map(
        db
          .query<{ toolset_id: string; active: boolean }>('SELECT toolset_id, active FROM toolset_defaults')
          .map((r) => [r.toolset_id, r.active]),
      );
      return overrides;
    },
    setDefaults: (ids, active) =>
      settingsChange(() => {
        db.run(
          `INSERT INTO toolset_defaults (toolset_id, active) SELECT id, $2 FROM unnest($1::text[]) AS id
           ON CONFLICT (toolset_id) DO UPDATE SET active = excluded.active`,
          [ids, active],
        );
      }),
    setEnabled: (toolsetId, enabled) =>
      settingsChange(() => {
        db.run(
          `INSERT INTO toolset_settings (toolset_id, enabled) VALUES ($1, $2)
           ON CONFLICT (toolset_id) DO UPDATE SET enabled = excluded.enabled`,
          [toolsetId, enabled],
        );
        if (!enabled) db.run('DELETE FROM session_toolsets WHERE toolset_id = $1', [toolsetId]);
      }),
    dropSessions,
    dropToolset: (toolsetId) =>
      settingsChange(() => {
        db.run('DELETE FROM session_toolsets WHERE toolset_id = $1', [toolsetId]);
      }),
    lastListing: (toolsetId) =>
      db
        .query<{ definition: string }>(
          'SELECT definition FROM upstream_tools WHERE toolset_id = $1 ORDER BY position',
          [toolsetId],
        )
        .map((r) => JSON.parse(r.definition) as PinnedDefinition),
    saveListing: (toolsetId, definitions) =>
      db.transaction(() => {
        db.run('DELETE FROM upstream_tools WHERE toolset_id = $1', [toolsetId]);
        if (definitions.length === 0) return;
        db.run(
          `INSERT INTO upstream_tools (toolset_id, tool, position, definition)
           SELECT $1, t.tool, t.n - 1, t.definition
           FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS t(tool, definition, n)
           ON CONFLICT DO NOTHING`,
          [toolsetId, definitions.map((d) => d.name), definitions.map((d) => JSON.stringify(d))],
        );
      }),
    pins(toolsetId) {
      const rows = db.query<{ tool: string | null; hash: string; definition: string }>(
        `SELECT p.tool, p.hash, p.definition FROM pinned_toolsets t
         LEFT JOIN tool_pins p ON p.toolset_id = t.toolset_id WHERE t.toolset_id = $1`,
        [toolsetId],
      );
      if (rows.length === 0) return null;
      return new Map(
        rows.flatMap((r): [string, Pin][] =>
          r.tool === null ? [] : [[r.tool, { hash: r.hash, definition: JSON.parse(r.definition) }]],
        ),
      );
    },
    pin: (toolsetId, pins) =>
      db.transaction(() => {
        const now = new Date().toISOString();
        db.run('INSERT INTO pinned_toolsets (toolset_id, first_at) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
          toolsetId,
          now,
        ]);
        if (pins.length > 0) {
          db.run(
            `INSERT INTO tool_pins (toolset_id, tool, hash, definition, approved_at)
             SELECT $1, t.tool, t.hash, t.definition, $5 FROM unnest($2::text[], $3::text[], $4::text[]) AS t(tool, hash, definition)
             ON CONFLICT (toolset_id, tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition,
               approved_at = excluded.approved_at`,
            [
              toolsetId,
              pins.map((p) => p.definition.name),
              pins.map((p) => p.hash),
              pins.map((p) => JSON.stringify(p.definition)),
              now,
            ],
          );
        }
        notify({ kind: 'pins', id: toolsetId });
      }),
    audit(entry: AuditEntry) {
      const { actor, task_id } = currentActor();
      pending.push([
        new Date().toISOString(),
        entry.session_id === null ? null : clip(entry.session_id, AUDIT_SUBJECT_MAX),
        entry.kind,
        clip(entry.subject, AUDIT_SUBJECT_MAX),
        entry.ok,
        entry.detail === undefined ? null : clip(entry.detail, AUDIT_DETAIL_MAX),
        clip(actor, AUDIT_SUBJECT_MAX),
        task_id === undefined ? null : clip(task_id, AUDIT_SUBJECT_MAX),
      ]);
      if (pending.length >= AUDIT_BATCH) flush();
      else timer ??= setTimeout(flush, AUDIT_DELAY_MS);
    },
    listAudit(filter: AuditFilter): AuditPage {
      flush();
      const from = filter.since ? firstSince(filter.since) : '1';
      const to = filter.until
        ? db.query<{ id: string }>('SELECT id FROM audit WHERE at <= $1 ORDER BY at DESC, id DESC LIMIT 1', [
            filter.until,
          ])[0]?.id
        : String(Number.MAX_SAFE_INTEGER);
      if (from === undefined || to === undefined || filter.subjects?.length === 0)
        return { audit: [], next_cursor: null };
      const values: Record<string, unknown> = {
        ...filter,
        ok: filter.ok,
        subjects: filter.subjects ? [...filter.subjects] : undefined,
        to,
      };
      const params: unknown[] = [filter.cursor ?? String(Number.MAX_SAFE_INTEGER), from, filter.limit];
      const { conditions } = auditConditions(
        filter,
        (name) => {
          params.push(values[name]);
          return `$${params.length}`;
        },
        // A subject equal to one of them, or a comma-separated list of toolsets holding one.
        (subjects) =>
          `EXISTS (SELECT 1 FROM unnest(${subjects}::text[]) j(v) WHERE strpos(',' || audit.subject || ',', ',' || j.v || ',') > 0)`,
      );
      const rows = db.query<StoredAudit>(auditPage(conditions.map((c) => `${c} AND `).join('')), params);
      const audit: AuditRow[] = rows.map(({ subject_length, detail_length, ...r }) => ({
        ...r,
        id: Number(r.id),
        subject: clip(r.subject, LISTED_SUBJECT_MAX, subject_length),
        detail: r.detail === null ? null : clip(r.detail, LISTED_DETAIL_MAX, detail_length ?? 0),
        actor: r.actor ?? 'unknown',
      }));
      const last = audit.at(-1);
      return { audit, next_cursor: audit.length === filter.limit && last ? String(last.id) : null };
    },
    pruneAudit: (before, limit) =>
      db.run('DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < $1 ORDER BY at LIMIT $2)', [
        before,
        limit,
      ]),
    pruneAuditOverflow(maxRows, limit) {
      // The newest `maxRows` rows stay: the first row past them and everything older goes.
      return db.run(
        `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE id <= (
           SELECT id FROM audit ORDER BY id DESC OFFSET $1 LIMIT 1) ORDER BY id LIMIT $2)`,
        [maxRows, limit],
      );
    },
    pruneIdleSessions(before, limit) {
      const since = firstSince(before) ?? String(Number.MAX_SAFE_INTEGER);
      // One statement: a session another replica uses meanwhile is judged with its rows as they are then.
      return db.run(
        `DELETE FROM sessions WHERE id IN (SELECT s.id FROM sessions s WHERE s.created_at < $1
           AND NOT EXISTS (SELECT 1 FROM audit a WHERE a.session_id = s.id AND a.id >= $2)
           AND NOT EXISTS (SELECT 1 FROM mcp_handles h WHERE h.handle = s.id)
           AND NOT EXISTS (SELECT 1 FROM approvals p WHERE p.session_id = s.id AND p.status = 'pending')
           LIMIT $3 FOR UPDATE SKIP LOCKED)`,
        [before, since, limit],
      );
    },
    flush,
    close() {
      flush();
      db.close();
    },
  };
}

function postgresApprovalQueries(db: SyncPostgres): ApprovalQueries {
  return {
    expire: (timeoutMs, before) =>
      void db.run(
        "UPDATE approvals SET status = 'expired', decided_at = created_at + $1 WHERE status = 'pending' AND created_at < $2",
        [timeoutMs, before],
      ),
    find: (session, kind, subject, hash, status) =>
      db.query<ApprovalRow>(
        `SELECT * FROM approvals WHERE session_id = $1 AND kind = $2 AND subject = $3 AND args_hash = $4
         AND status = $5 ORDER BY created_at LIMIT 1`,
        [session, kind, subject, hash, status],
      )[0],
    insert: (r) =>
      void db.run(
        `INSERT INTO approvals (id, session_id, task_id, kind, subject, arguments, args_hash, reason, status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9) ON CONFLICT DO NOTHING`,
        [r.id, r.session_id, r.task_id, r.kind, r.subject, r.arguments, r.args_hash, r.reason, r.created_at],
      ),
    // A second replica spending the same approval waits for the first's commit, then finds it used.
    spend: (id) =>
      db.run("UPDATE approvals SET status = 'used' WHERE id = $1 AND status = 'approved'", [id]) > 0,
    get: (id) => db.query<ApprovalRow>('SELECT * FROM approvals WHERE id = $1', [id])[0],
    decide: (status, at, by, reason, id) =>
      db.run(
        `UPDATE approvals SET status = $1, decided_at = $2, decided_by = $3, decision_reason = $4
         WHERE id = $5 AND status = 'pending'`,
        [status, at, by, reason, id],
      ),
    prune: (before, limit) =>
      db.run(
        `DELETE FROM approvals WHERE id IN (SELECT id FROM approvals WHERE status != 'pending'
         AND COALESCE(decided_at, created_at) < $1 LIMIT $2)`,
        [before, limit],
      ),
    list: (f) =>
      db.query<ApprovalRow>(
        `SELECT * FROM approvals WHERE ($1::text IS NULL OR status = $1)
         AND ($2::text IS NULL OR session_id = $2) ORDER BY created_at DESC LIMIT $3`,
        [f.status, f.session_id, f.limit],
      ),
    transaction: (work) => db.transaction(work),
  };
}

function postgresHandleQueries(db: SyncPostgres): HandleQueries {
  const handles = (rows: { handle: string }[]) => rows.map((r) => r.handle);
  return {
    insert: (handle, credential, at) =>
      void db.run(
        'INSERT INTO mcp_handles (handle, credential, created_at, last_used_at) VALUES ($1, $2, $3, $3)',
        [handle, credential, at],
      ),
    get: (handle) =>
      db.query<{ credential: string | null; last_used_at: number }>(
        'SELECT credential, last_used_at FROM mcp_handles WHERE handle = $1',
        [handle],
      )[0],
    touch: (at, handle) =>
      void db.run('UPDATE mcp_handles SET last_used_at = $1 WHERE handle = $2', [at, handle]),
    drop: (handle) => void db.run('DELETE FROM mcp_handles WHERE handle = $1', [handle]),
    sweep: (before) =>
      handles(db.query('DELETE FROM mcp_handles WHERE last_used_at < $1 RETURNING handle', [before])),
    count: (credential) =>
      Number(
        db.query<{ n: number }>(
          'SELECT COUNT(*) AS n FROM mcp_handles WHERE credential IS NOT DISTINCT FROM $1',
          [credential],
        )[0].n,
      ),
    dropOldest: (credential, n) =>
      handles(
        db.query(
          `DELETE FROM mcp_handles WHERE handle IN (SELECT handle FROM mcp_handles
           WHERE credential IS NOT DISTINCT FROM $1 ORDER BY last_used_at LIMIT $2) RETURNING handle`,
          [credential, n],
        ),
      ),
  };
}

function postgresLegacyQueries(db: SyncPostgres, notify: (change: GatewayChange) => void): LegacyQueries {
  return {
    save: (key, r, now) =>
      void db.run(
        `INSERT INTO mcp_legacy_sessions (id_hash, credential, own_session, handle, init, created_at, last_seen)
         VALUES ($1, $2, $3, $4, $5, $6, $6)
         ON CONFLICT (id_hash) DO UPDATE SET credential = excluded.credential, own_session = excluded.own_session,
           handle = excluded.handle, init = excluded.init, created_at = excluded.created_at,
           last_seen = excluded.last_seen`,
        [key, r.credential, r.own_session, r.handle, r.init, now],
      ),
    get: (key) =>
      db.query<LegacyRow>(
        'SELECT credential, own_session, handle, init, last_seen FROM mcp_legacy_sessions WHERE id_hash = $1',
        [key],
      )[0],
    // A session bound to a handle here: the replicas holding it open hear it as a change of its own session.
    setHandle: (handle, key) =>
      db.transaction(() => {
        const [row] = db.query<{ own_session: string }>(
          'UPDATE mcp_legacy_sessions SET handle = $1 WHERE id_hash = $2 RETURNING own_session',
          [handle, key],
        );
        if (row) notify({ kind: 'session', id: row.own_session });
      }),
    touch: (seen) =>
      void db.run(
        `UPDATE mcp_legacy_sessions s SET last_seen = t.at FROM unnest($1::text[], $2::bigint[]) AS t(key, at)
         WHERE s.id_hash = t.key AND s.last_seen < t.at`,
        [seen.map(([key]) => key), seen.map(([, at]) => at)],
      ),
    drop: (key) => void db.run('DELETE FROM mcp_legacy_sessions WHERE id_hash = $1', [key]),
    idle: (before, limit) =>
      db.query(
        'SELECT id_hash, own_session FROM mcp_legacy_sessions WHERE last_seen < $1 ORDER BY last_seen LIMIT $2',
        [before, limit],
      ),
  };
}
