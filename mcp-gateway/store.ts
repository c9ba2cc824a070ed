import type { Db } from '../lib/sqlite.ts';

// The gateway's state in SQLite: sessions, their active toolsets in activation order, the operator's
// enabled/disabled ceiling, and an audit trail. The only module that speaks SQL for the gateway.

const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS session_toolsets (
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  toolset_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (session_id, toolset_id)
);
CREATE TABLE IF NOT EXISTS toolset_settings (toolset_id TEXT PRIMARY KEY, enabled INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  session_id TEXT,
  kind TEXT NOT NULL,
  subject TEXT NOT NULL,
  ok INTEGER NOT NULL,
  detail TEXT
);
`;

/** One audit line: an admin change or a tool call, allowed or refused. */
export interface AuditEntry {
  session_id: string | null;
  kind: 'activate' | 'deactivate' | 'enable' | 'disable' | 'call' | 'manage';
  subject: string;
  ok: boolean;
  detail?: string;
}

/** The gateway's persistence; swap this module to move to another database. */
export type GatewayStore = ReturnType<typeof createGatewayStore>;

/** Creates the tables if needed and returns the gateway's queries. */
export function createGatewayStore(db: Db) {
  db.exec(SCHEMA);
  const q = {
    hasSession: db.prepare<[string], { id: string }>('SELECT id FROM sessions WHERE id = ?'),
    addSession: db.prepare('INSERT OR IGNORE INTO sessions (id, created_at) VALUES (?, ?)'),
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
    setEnabled: db.prepare(
      'INSERT INTO toolset_settings (toolset_id, enabled) VALUES (?, ?) ON CONFLICT(toolset_id) DO UPDATE SET enabled = excluded.enabled',
    ),
    audit: db.prepare(
      'INSERT INTO audit (at, session_id, kind, subject, ok, detail) VALUES (?, ?, ?, ?, ?, ?)',
    ),
  };

  /** The session's active toolsets in activation order, or null for a session never stored. */
  const activeToolsets = (sessionId: string): string[] | null =>
    q.hasSession.get(sessionId) ? q.active.all(sessionId).map((r) => r.toolset_id) : null;

  return {
    /** Creates the session with `defaults` active unless it exists; true when it was created. */
    ensureSession: db.transaction((sessionId: string, defaults: readonly string[]): boolean => {
      if (q.hasSession.get(sessionId)) return false;
      q.addSession.run(sessionId, new Date().toISOString());
      for (const id of defaults) q.activate.run(sessionId, id, sessionId);
      return true;
    }),
    activeToolsets,
    /** Activates in the given order; returns the ids that were not active before. */
    activate: db.transaction((sessionId: string, ids: readonly string[]): string[] =>
      ids.filter((id) => q.activate.run(sessionId, id, sessionId).changes > 0),
    ),
    /** Deactivates; returns the ids that were active before. */
    deactivate: db.transaction((sessionId: string, ids: readonly string[]): string[] =>
      ids.filter((id) => q.deactivate.run(sessionId, id).changes > 0),
    ),
    disabledToolsets: () => new Set(q.disabled.all().map((r) => r.toolset_id)),
    /** Sets the operator's ceiling; disabling also removes the toolset from every session. */
    setEnabled: db.transaction((toolsetId: string, enabled: boolean) => {
      q.setEnabled.run(toolsetId, enabled ? 1 : 0);
      if (!enabled) q.removeEverywhere.run(toolsetId);
    }),
    audit(entry: AuditEntry) {
      q.audit.run(
        new Date().toISOString(),
        entry.session_id,
        entry.kind,
        entry.subject,
        entry.ok ? 1 : 0,
        entry.detail ?? null,
      );
    },
    close: () => db.close(),
  };
}
