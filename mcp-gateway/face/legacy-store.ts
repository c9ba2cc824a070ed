import { createHash } from 'node:crypto';
import type { Db } from '../../lib/sqlite.ts';

// The legacy leg's sessions, kept across a gateway restart. A 2025-era client (desktop clients embed the v1
// SDK) goes on sending its Mcp-Session-Id after the gateway restarted and never initializes again by itself:
// a session the gateway forgot strands it until someone reconnects it by hand. A row keeps what serving the
// session again needs: the credential it is bound to, the gateway sessions it acts in (its own, and the
// handle it took), and what the client said at initialize. The session id is a bearer secret: only its
// SHA-256 is stored, never the id.

const SCHEMA = `
CREATE TABLE IF NOT EXISTS mcp_legacy_sessions (
  id_hash TEXT PRIMARY KEY,
  credential TEXT,
  own_session TEXT NOT NULL,
  handle TEXT,
  init TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_seen INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_legacy_sessions_seen ON mcp_legacy_sessions (last_seen);
`;

/** What a client said at initialize: replayed to serve its session again after a restart. */
export interface LegacyInit {
  protocolVersion: string;
  capabilities: Record<string, unknown>;
  clientInfo: { name: string; version: string } & Record<string, unknown>;
}

/** A legacy session as stored. */
export interface StoredLegacySession {
  credential: string | null;
  /** The connection's own gateway session (never the Mcp-Session-Id). */
  ownSession: string;
  /** The handle the connection acts in, once it has one. */
  handle: string | null;
  init: LegacyInit;
  lastSeen: number;
}

/** The most bytes of initialize parameters kept for a session; beyond it only the protocol version is. */
const INIT_MAX_BYTES = 16 * 1024;

/** The key a session is stored under: the SHA-256 of its id (the id itself is a bearer secret). */
export function legacySessionKey(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('base64url');
}

/** A legacy session's row as stored. */
export interface LegacyRow {
  credential: string | null;
  own_session: string;
  handle: string | null;
  init: string;
  last_seen: number;
}

/** The statements legacy sessions need: SQLite's below, PostgreSQL's in store/postgres.ts. */
export interface LegacyQueries {
  /** Inserts or replaces a session's row. */
  save(key: string, row: Omit<LegacyRow, 'last_seen'>, now: number): void;
  get(key: string): LegacyRow | undefined;
  setHandle(handle: string | null, key: string): void;
  /** Moves last_seen forward (never back), in one transaction for all. */
  touch(seen: readonly (readonly [string, number])[]): void;
  drop(key: string): void;
  idle(before: number, limit: number): { id_hash: string; own_session: string }[];
}

/** The SQLite statements of the legacy sessions table (created if needed). */
export function sqliteLegacyQueries(db: Db): LegacyQueries {
  db.exec(SCHEMA);
  const q = {
    insert: db.prepare(
      `INSERT OR REPLACE INTO mcp_legacy_sessions (id_hash, credential, own_session, handle, init, created_at, last_seen)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    get: db.prepare<[string], LegacyRow>(
      'SELECT credential, own_session, handle, init, last_seen FROM mcp_legacy_sessions WHERE id_hash = ?',
    ),
    setHandle: db.prepare('UPDATE mcp_legacy_sessions SET handle = ? WHERE id_hash = ?'),
    touch: db.prepare('UPDATE mcp_legacy_sessions SET last_seen = ? WHERE id_hash = ? AND last_seen < ?'),
    drop: db.prepare('DELETE FROM mcp_legacy_sessions WHERE id_hash = ?'),
    idle: db.prepare<[number, number], { id_hash: string; own_session: string }>(
      'SELECT id_hash, own_session FROM mcp_legacy_sessions WHERE last_seen < ? ORDER BY last_seen LIMIT ?',
    ),
  };
  const touchAll = db.transaction((seen: readonly (readonly [string, number])[]) => {
    for (const [key, at] of seen) q.touch.run(at, key, at);
  });
  return {
    save: (key, r, now) => void q.insert.run(key, r.credential, r.own_session, r.handle, r.init, now, now),
    get: (key) => q.get.get(key),
    setHandle: (handle, key) => void q.setHandle.run(handle, key),
    touch: (seen) => touchAll(seen),
    drop: (key) => void q.drop.run(key),
    idle: (before, limit) => q.idle.all(before, limit),
  };
}

/** The legacy sessions table in SQLite (created if needed). */
export function createLegacySessionStore(db: Db): LegacySessionStore {
  return legacySessionStore(sqliteLegacyQueries(db));
}

/** The legacy sessions table, on either database; `LegacySessions` (legacy-sessions.ts) is its only user. */
export type LegacySessionStore = ReturnType<typeof legacySessionStore>;

/** Legacy sessions over `q`, whichever database answers it. */
export function legacySessionStore(q: LegacyQueries) {
  return {
    /** Records a session just initialized. */
    save(key: string, row: Omit<StoredLegacySession, 'lastSeen'>, now: number): void {
      let init = JSON.stringify(row.init);
      if (Buffer.byteLength(init) > INIT_MAX_BYTES) {
        init = JSON.stringify({
          protocolVersion: row.init.protocolVersion,
          capabilities: {},
          clientInfo: { name: 'unknown', version: '0' },
        });
      }
      q.save(key, { credential: row.credential, own_session: row.ownSession, handle: row.handle, init }, now);
    },
    /** The stored session, or undefined. */
    get(key: string): StoredLegacySession | undefined {
      const r = q.get(key);
      if (!r) return undefined;
      return {
        credential: r.credential,
        ownSession: r.own_session,
        handle: r.handle,
        init: JSON.parse(r.init) as LegacyInit,
        lastSeen: r.last_seen,
      };
    },
    /** Records the handle a session now acts in (null: its own session again). */
    setHandle(key: string, handle: string | null): void {
      q.setHandle(handle, key);
    },
    /** Records when sessions were last used (never moves a time back). */
    touch(seen: readonly (readonly [string, number])[]): void {
      if (seen.length > 0) q.touch(seen);
    },
    /** Forgets a session that ended. */
    drop(key: string): void {
      q.drop(key);
    },
    /** At most `limit` stored sessions unused since `before` (ms), oldest first. */
    idle(before: number, limit = 500): { key: string; ownSession: string }[] {
      return q.idle(before, limit).map((r) => ({ key: r.id_hash, ownSession: r.own_session }));
    },
  };
}
