import { createHash } from 'node:crypto';
import type { LegacyQueries, LegacyRow } from '../store/interface.ts';

export type { LegacyQueries, LegacyRow };

// The legacy leg's sessions, kept across a gateway restart. A 2025-era client (desktop clients embed the v1
// SDK) goes on sending its Mcp-Session-Id after the gateway restarted and never initializes again by itself:
// a session the gateway forgot strands it until someone reconnects it by hand. A row keeps what serving the
// session again needs: the credential it is bound to, the gateway sessions it acts in (its own, and the
// handle it took), and what the client said at initialize. The session id is a bearer secret: only its
// SHA-256 is stored, never the id.

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

/** The legacy sessions table, on either database; `LegacySessions` (legacy-sessions.ts) is its only user. */
export type LegacySessionStore = ReturnType<typeof legacySessionStore>;

/** Legacy sessions over `q`, whichever database answers it. */
export function legacySessionStore(q: LegacyQueries) {
  return {
    /** Records a session just initialized. */
    async save(key: string, row: Omit<StoredLegacySession, 'lastSeen'>, now: number): Promise<void> {
      let init = JSON.stringify(row.init);
      if (Buffer.byteLength(init) > INIT_MAX_BYTES) {
        init = JSON.stringify({
          protocolVersion: row.init.protocolVersion,
          capabilities: {},
          clientInfo: { name: 'unknown', version: '0' },
        });
      }
      await q.save(
        key,
        { credential: row.credential, own_session: row.ownSession, handle: row.handle, init },
        now,
      );
    },
    /** The stored session, or undefined. */
    async get(key: string): Promise<StoredLegacySession | undefined> {
      const r = await q.get(key);
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
    setHandle(key: string, handle: string | null): Promise<void> {
      return q.setHandle(handle, key);
    },
    /** Records when sessions were last used (never moves a time back). */
    async touch(seen: readonly (readonly [string, number])[]): Promise<void> {
      if (seen.length > 0) await q.touch(seen);
    },
    /** Forgets a session that ended. */
    drop(key: string): Promise<void> {
      return q.drop(key);
    },
    /** At most `limit` stored sessions unused since `before` (ms), oldest first. */
    async idle(before: number, limit = 500): Promise<{ key: string; ownSession: string }[]> {
      return (await q.idle(before, limit)).map((r) => ({ key: r.id_hash, ownSession: r.own_session }));
    },
  };
}
