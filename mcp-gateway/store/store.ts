import type { Statement } from 'better-sqlite3';
import { createWriteBatch, type Db } from '../../lib/sqlite.ts';
import type { Pin, PinnedDefinition } from '../catalog/pins.ts';
import { currentActor } from '../core/audit-context.ts';
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
  type StoredAuditRow,
} from './audit.ts';
import type { GatewayStore } from './interface.ts';
import { SCHEMA } from './schema.ts';

export type { AuditEntry, AuditFilter, AuditPage, AuditRow, GatewayStore };

// The gateway's state in SQLite: sessions, their active toolsets in activation order, the operator's
// enabled/disabled ceiling, an audit trail, and the upstream MCP tool definitions: the last listing of
// each upstream toolset and the pinned (approved) definitions. The only module that speaks SQL for the gateway.

/** The gateway's persistence; swap this module to move to another database. */

/**
 * Creates the tables if needed and returns the gateway's queries. Audit rows are committed together a few
 * milliseconds after they are written (lib/sqlite.ts createWriteBatch; every tool call writes one), and the audit listing
 * flushes first; a row that fails to write is given to `onWriteError`.
 */
export function createGatewayStore(
  db: Db,
  onWriteError: (err: unknown) => void = (err) => process.emitWarning(`audit write failed: ${err}`),
): GatewayStore {
  db.exec(SCHEMA);
  // Kept with the store, never thrown away: on Node 24 a collected statement can abort the process (sqlite.ts).
  const auditColumns = db.prepare<[string], { name: string }>('SELECT name FROM pragma_table_info(?)');
  // Databases from before actors were recorded get the columns (NULL for their old rows).
  const columns = new Set(auditColumns.all('audit').map((c) => c.name));
  if (!columns.has('actor')) db.exec('ALTER TABLE audit ADD COLUMN actor TEXT');
  if (!columns.has('task_id')) db.exec('ALTER TABLE audit ADD COLUMN task_id TEXT');
  // The listing pages by id (the rowid) within a session or task, and retention deletes by age.
  db.exec(`CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id, id);
    CREATE INDEX IF NOT EXISTS audit_task ON audit (task_id, id);
    CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
    CREATE INDEX IF NOT EXISTS audit_actor ON audit (actor, id);
    CREATE INDEX IF NOT EXISTS audit_kind ON audit (kind, id);
    CREATE INDEX IF NOT EXISTS sessions_created ON sessions (created_at);`);
  // A listed row's texts are cut in SQL: a row stored before the write bound may hold megabytes.
  // One statement per combination of filters, each able to walk an index, prepared at its first use and kept
  // (at most one per combination).
  const auditPages = new Map<string, Statement<Record<string, unknown>, StoredAuditRow>>();
  const auditPage = (filter: AuditFilter) => {
    const { conditions, key, params } = auditConditions(
      filter,
      (name) => `@${name}`,
      // A subject equal to one of them (one instr against them all joined, read once), or a comma-separated
      // list of toolsets holding one (only subjects with a comma are looked into).
      (subjects) =>
        `(instr((SELECT ',' || group_concat(value, ',') || ',' FROM json_each(${subjects})), ',' || subject || ',') > 0
          OR (instr(subject, ',') > 0 AND EXISTS (SELECT 1 FROM json_each(${subjects}) j
            WHERE instr(',' || audit.subject || ',', ',' || j.value || ',') > 0)))`,
    );
    let stmt = auditPages.get(key);
    if (!stmt) {
      stmt = db.prepare<Record<string, unknown>, StoredAuditRow>(
        `SELECT id, at, session_id, task_id, actor, kind, substr(subject, 1, ${LISTED_SUBJECT_MAX}) AS subject,
           length(subject) AS subject_length, ok, substr(detail, 1, ${LISTED_DETAIL_MAX}) AS detail,
           length(detail) AS detail_length
         FROM audit WHERE ${conditions.map((c) => `${c} AND `).join('')}id < @cursor AND id >= @from
         ORDER BY id DESC LIMIT @limit`,
      );
      auditPages.set(key, stmt);
    }
    return { stmt, params };
  };
  const q = {
    auditColumns,
    hasSession: db.prepare<[string], { id: string }>('SELECT id FROM sessions WHERE id = ?'),
    addSession: db.prepare('INSERT OR IGNORE INTO sessions (id, created_at) VALUES (?, ?)'),
    // session_toolsets goes with it (ON DELETE CASCADE; lib/sqlite.ts turns foreign keys on).
    dropSession: db.prepare('DELETE FROM sessions WHERE id = ?'),
    active: db.prepare<[string], { toolset_id: string }>(
      'SELECT toolset_id FROM session_toolsets WHERE session_id = ? ORDER BY seq',
    ),
    activate: db.prepare(
      `INSERT OR IGNORE INTO session_toolsets (session_id, toolset_id, seq)
       VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM session_toolsets WHERE session_id = ?))`,
    ),
    deactivate: db.prepare('DELETE FROM session_toolsets WHERE session_id = ? AND toolset_id = ?'),
    removeEverywhere: db.prepare('DELETE FROM session_toolsets WHERE toolset_id = ?'),
    disabled: db.prepare<[], { toolset_id: string }>(
      'SELECT toolset_id FROM toolset_settings WHERE enabled = 0',
    ),
    defaultOverrides: db.prepare<[], { toolset_id: string; active: number }>(
      'SELECT toolset_id, active FROM toolset_defaults',
    ),
    setDefault: db.prepare(
      'INSERT INTO toolset_defaults (toolset_id, active) VALUES (?, ?) ON CONFLICT(toolset_id) DO UPDATE SET active = excluded.active',
    ),
    setEnabled: db.prepare(
      'INSERT INTO toolset_settings (toolset_id, enabled) VALUES (?, ?) ON CONFLICT(toolset_id) DO UPDATE SET enabled = excluded.enabled',
    ),
    audit: db.prepare(
      'INSERT INTO audit (at, session_id, kind, subject, ok, detail, actor, task_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    // One statement per filter, each able to walk its index (an `@x IS NULL OR` filter could not).
    pruneAuditBefore: db.prepare(
      'DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? ORDER BY at LIMIT ?)',
    ),
    auditCount: db.prepare<[], number>('SELECT COUNT(*) FROM audit').pluck(),
    pruneAuditOldest: db.prepare('DELETE FROM audit WHERE id IN (SELECT id FROM audit ORDER BY id LIMIT ?)'),
    tableExists: db.prepare<[string], number>(
      "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
    ),
    // Rows are appended in time order, so `since` becomes the first id at or after it (audit_at).
    auditFirstSince: db
      .prepare<[string], number | null>('SELECT id FROM audit WHERE at >= ? ORDER BY at, id LIMIT 1')
      .pluck(),
    auditLastUntil: db
      .prepare<[string], number | null>(
        'SELECT id FROM audit WHERE at <= ? ORDER BY at DESC, id DESC LIMIT 1',
      )
      .pluck(),
    listing: db.prepare<[string], { definition: string }>(
      'SELECT definition FROM upstream_tools WHERE toolset_id = ? ORDER BY position',
    ),
    clearListing: db.prepare('DELETE FROM upstream_tools WHERE toolset_id = ?'),
    addListing: db.prepare(
      'INSERT INTO upstream_tools (toolset_id, tool, position, definition) VALUES (?, ?, ?, ?)',
    ),
    pinned: db.prepare<[string], { toolset_id: string }>(
      'SELECT toolset_id FROM pinned_toolsets WHERE toolset_id = ?',
    ),
    markPinned: db.prepare('INSERT OR IGNORE INTO pinned_toolsets (toolset_id, first_at) VALUES (?, ?)'),
    pins: db.prepare<[string], { tool: string; hash: string; definition: string }>(
      'SELECT tool, hash, definition FROM tool_pins WHERE toolset_id = ?',
    ),
    pin: db.prepare(
      `INSERT INTO tool_pins (toolset_id, tool, hash, definition, approved_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(toolset_id, tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition,
       approved_at = excluded.approved_at`,
    ),
  };

  // Read on every tool call: kept in memory as well, the disabled set whole and the active toolsets of the most
  // recently used sessions. This store's own changes drop what they touch (`changing` below); a commit by
  // any other connection to the file (another gateway on the same data dir, an operator's sqlite3) moves
  // SQLite's data_version, and then everything kept is dropped before the next read.
  let disabled: ReadonlySet<string> | null = null;
  const sessions = new Map<string, readonly string[] | null>();
  const SESSIONS_KEPT = 10_000;
  const forget = () => {
    disabled = null;
    sessions.clear();
  };
  const dataVersion = db.prepare('PRAGMA data_version').pluck();
  let seenVersion = dataVersion.get();
  // Asked once per synchronous run (a request's rules read the store several times in one): another
  // connection's commit cannot land in the middle of it in a way one run could see consistently anyway.
  let versionAsked = false;
  const forgetIfChangedElsewhere = () => {
    if (versionAsked) return;
    versionAsked = true;
    queueMicrotask(() => {
      versionAsked = false;
    });
    const version = dataVersion.get();
    if (version !== seenVersion) {
      seenVersion = version;
      forget();
    }
  };

  /** The session's active toolsets in activation order, or null for a session never stored. */
  const activeToolsets = (sessionId: string): string[] | null => {
    forgetIfChangedElsewhere();
    let ids = sessions.get(sessionId);
    if (ids === undefined) {
      ids = q.hasSession.get(sessionId) ? q.active.all(sessionId).map((r) => r.toolset_id) : null;
      if (sessions.size >= SESSIONS_KEPT) sessions.delete(sessions.keys().next().value as string);
    } else sessions.delete(sessionId);
    sessions.set(sessionId, ids);
    return ids && [...ids];
  };

  const batch = createWriteBatch(db, onWriteError);
  /**
   * A transaction that changes session state (its first argument's session, or with `everyone` all of them):
   * what is kept in memory of it is dropped once it has committed or failed.
   */
  function changing<A extends [string, ...unknown[]], R>(fn: (...args: A) => R, everyone = false) {
    const tx = db.transaction(fn);
    return (...args: A): R => {
      try {
        return tx(...args);
      } finally {
        if (everyone) forget();
        else sessions.delete(args[0]);
      }
    };
  }
  // Prepared at the first sweep: the handle and approval tables are created by their stores after this one.
  const prepareIdleSessions = () => {
    const has = (table: string) => (q.tableExists.get(table) !== undefined ? table : null);
    const handles = has('mcp_handles');
    const approvals = has('approvals');
    return db
      .prepare<[string, number, number], string>(
        // Activity since `before` is a row at or after the first id written since then: one seek in
        // audit_session, however many rows the session has.
        `SELECT s.id FROM sessions s WHERE s.created_at < ?
         AND NOT EXISTS (SELECT 1 FROM audit a WHERE a.session_id = s.id AND a.id >= ?)
         ${handles ? 'AND NOT EXISTS (SELECT 1 FROM mcp_handles h WHERE h.handle = s.id)' : ''}
         ${approvals ? "AND NOT EXISTS (SELECT 1 FROM approvals p WHERE p.session_id = s.id AND p.status = 'pending')" : ''}
         LIMIT ?`,
      )
      .pluck();
  };
  let idleSessions: ReturnType<typeof prepareIdleSessions> | null = null;
  const dropSessionsTx = db.transaction((ids: readonly string[]) => {
    for (const id of ids) q.dropSession.run(id);
  });
  return {
    /** Creates the session with `defaults` active unless it exists; true when it was created. */
    ensureSession: changing((sessionId: string, defaults: readonly string[]): boolean => {
      if (q.hasSession.get(sessionId)) return false;
      q.addSession.run(sessionId, new Date().toISOString());
      for (const id of defaults) q.activate.run(sessionId, id, sessionId);
      return true;
    }),
    activeToolsets,
    /** Activates in the given order; returns the ids that were not active before. */
    activate: changing((sessionId: string, ids: readonly string[]): string[] =>
      ids.filter((id) => q.activate.run(sessionId, id, sessionId).changes > 0),
    ),
    /** Deactivates; returns the ids that were active before. */
    deactivate: changing((sessionId: string, ids: readonly string[]): string[] =>
      ids.filter((id) => q.deactivate.run(sessionId, id).changes > 0),
    ),
    /** Toolsets the operator has disabled (do not change the set). */
    disabledToolsets(): ReadonlySet<string> {
      forgetIfChangedElsewhere();
      disabled ??= new Set(q.disabled.all().map((r) => r.toolset_id));
      return disabled;
    },
    /**
     * The user's changes to which toolsets a new session starts with (true: on, false: off), over the toolset
     * files' `default`. Read each time: it is small, and another process may have changed it.
     */
    defaultOverrides(): ReadonlyMap<string, boolean> {
      return new Map(q.defaultOverrides.all().map((r) => [r.toolset_id, r.active === 1]));
    },
    /** Sets whether new sessions start with these toolsets active; sessions never changed follow it too. */
    setDefaults: db.transaction((ids: readonly string[], active: boolean) => {
      for (const id of ids) q.setDefault.run(id, active ? 1 : 0);
    }),
    /** Sets the operator's ceiling; disabling also removes the toolset from every session. */
    setEnabled: changing((toolsetId: string, enabled: boolean) => {
      q.setEnabled.run(toolsetId, enabled ? 1 : 0);
      if (!enabled) q.removeEverywhere.run(toolsetId);
    }, true),
    /** Deletes sessions with their active toolsets (a deleted MCP handle's, an idle one's). */
    dropSessions(ids: readonly string[]): void {
      try {
        dropSessionsTx(ids);
      } finally {
        for (const id of ids) sessions.delete(id);
      }
    },
    /** Removes a toolset that no longer exists from every session. */
    dropToolset: changing((toolsetId: string) => {
      q.removeEverywhere.run(toolsetId);
    }, true),
    /** The last tool listing seen from an upstream toolset, in the server's order. */
    lastListing: (toolsetId: string): PinnedDefinition[] =>
      q.listing.all(toolsetId).map((r) => JSON.parse(r.definition) as PinnedDefinition),
    saveListing: db.transaction((toolsetId: string, definitions: readonly PinnedDefinition[]) => {
      q.clearListing.run(toolsetId);
      definitions.forEach((d, i) => {
        q.addListing.run(toolsetId, d.name, i, JSON.stringify(d));
      });
    }),
    /** The approved definitions of a toolset, or null when it has never been pinned. */
    pins(toolsetId: string): Map<string, Pin> | null {
      if (!q.pinned.get(toolsetId)) return null;
      return new Map(
        q.pins.all(toolsetId).map((r) => [r.tool, { hash: r.hash, definition: JSON.parse(r.definition) }]),
      );
    },
    /** Approves definitions (and marks the toolset pinned: from now on, changes are held). */
    pin: db.transaction((toolsetId: string, pins: readonly Pin[]) => {
      const now = new Date().toISOString();
      q.markPinned.run(toolsetId, now);
      for (const p of pins)
        q.pin.run(toolsetId, p.definition.name, p.hash, JSON.stringify(p.definition), now);
    }),
    /** Records an entry with the current actor (audit-context.ts). */
    audit(entry: AuditEntry) {
      const { actor, task_id } = currentActor();
      // The row's values now: the entry may change after this call, the row must not.
      const row = [
        new Date().toISOString(),
        entry.session_id === null ? null : clip(entry.session_id, AUDIT_SUBJECT_MAX),
        entry.kind,
        clip(entry.subject, AUDIT_SUBJECT_MAX),
        entry.ok ? 1 : 0,
        entry.detail === undefined ? null : clip(entry.detail, AUDIT_DETAIL_MAX),
        clip(actor, AUDIT_SUBJECT_MAX),
        task_id === undefined ? null : clip(task_id, AUDIT_SUBJECT_MAX),
      ];
      batch.add(() => q.audit.run(...row));
    },
    /** A page of audit rows, newest first (keyset paging on the id: as fast on page 1,000 as on page 1). */
    listAudit(filter: AuditFilter): AuditPage {
      batch.flush();
      const from = filter.since ? q.auditFirstSince.get(filter.since) : 1;
      const to = filter.until ? q.auditLastUntil.get(filter.until) : Number.MAX_SAFE_INTEGER;
      const none = { audit: [], next_cursor: null };
      if (from === null || from === undefined || to === null || to === undefined) return none;
      if (filter.subjects?.length === 0) return none;
      const params: Record<string, unknown> = {
        session_id: filter.session_id,
        task_id: filter.task_id,
        actor: filter.actor,
        kind: filter.kind,
        ok: filter.ok === undefined ? undefined : filter.ok ? 1 : 0,
        subjects: filter.subjects ? JSON.stringify(filter.subjects) : undefined,
        to,
        cursor: filter.cursor ? Number(filter.cursor) : Number.MAX_SAFE_INTEGER,
        from,
        limit: filter.limit,
      };
      // better-sqlite3 refuses named parameters the statement does not use.
      const page = auditPage(filter);
      const used = Object.fromEntries(
        [...page.params, 'cursor', 'from', 'limit'].map((name) => [name, params[name]]),
      );
      const audit = page.stmt.all(used).map(({ subject_length, detail_length, ...r }) => ({
        ...r,
        subject: clip(r.subject, LISTED_SUBJECT_MAX, subject_length),
        detail: r.detail === null ? null : clip(r.detail, LISTED_DETAIL_MAX, detail_length ?? 0),
        ok: r.ok === 1,
        actor: r.actor ?? 'unknown',
      }));
      const last = audit.at(-1);
      return { audit, next_cursor: audit.length === filter.limit && last ? String(last.id) : null };
    },
    /** Retention (lib/retention.ts): deletes at most `limit` audit rows written before `before` (ISO). */
    pruneAudit(before: string, limit: number): number {
      return q.pruneAuditBefore.run(before, limit).changes;
    },
    /** Deletes at most `limit` of the oldest audit rows beyond the newest `maxRows`. */
    pruneAuditOverflow(maxRows: number, limit: number): number {
      const over = (q.auditCount.get() ?? 0) - maxRows;
      return over > 0 ? q.pruneAuditOldest.run(Math.min(over, limit)).changes : 0;
    },
    /**
     * Deletes at most `limit` sessions idle since `before` (ISO): created before it, with no audited activity
     * since (every change and call is audited), no MCP handle and no pending approval. Their next use starts
     * from the default toolsets, as a new session does.
     */
    pruneIdleSessions(before: string, limit: number): number {
      idleSessions ??= prepareIdleSessions();
      const firstSince = q.auditFirstSince.get(before) ?? Number.MAX_SAFE_INTEGER;
      const ids = idleSessions.all(before, firstSince, limit);
      if (ids.length > 0) dropSessionsTx(ids);
      for (const id of ids) sessions.delete(id);
      return ids.length;
    },
    /** Commits the queued writes now (for a reader outside this store, such as another process). */
    flush: () => batch.flush(),
    close() {
      batch.flush();
      db.close();
    },
  };
}
