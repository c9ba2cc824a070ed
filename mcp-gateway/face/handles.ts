import { randomBytes } from 'node:crypto';
import type { Db } from '../../lib/sqlite.ts';
import { FACE_SESSION_PREFIXES } from '../contract.ts';

// Session handles of the MCP face's modern leg (MCP 2026-07-28 has no protocol sessions: per-conversation
// state is a handle passed as a tool argument). A handle *is* a gateway session id, minted here with 128
// random bits, bound to the credential that minted it, and forgotten after an idle lifetime.

const SCHEMA = `
CREATE TABLE IF NOT EXISTS mcp_handles (
  handle TEXT PRIMARY KEY,
  credential TEXT,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL
);
`;

/** Why a handle cannot be used, in words the model (and its user) can act on. */
export class HandleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The statements handles need: SQLite's below, PostgreSQL's in store/postgres.ts. */
export interface HandleQueries {
  insert(handle: string, credential: string | null, at: number): void;
  get(handle: string): { credential: string | null; last_used_at: number } | undefined;
  touch(at: number, handle: string): void;
  drop(handle: string): void;
  /** Deletes the handles last used before `before`; returns them. */
  sweep(before: number): string[];
  count(credential: string | null): number;
  /** Deletes the `n` least recently used handles of `credential`; returns them. */
  dropOldest(credential: string | null, n: number): string[];
}

/** The SQLite statements of the handle table (created if needed). */
export function sqliteHandleQueries(db: Db): HandleQueries {
  db.exec(SCHEMA);
  const q = {
    insert: db.prepare(
      'INSERT INTO mcp_handles (handle, credential, created_at, last_used_at) VALUES (?, ?, ?, ?)',
    ),
    get: db.prepare<[string], { credential: string | null; last_used_at: number }>(
      'SELECT credential, last_used_at FROM mcp_handles WHERE handle = ?',
    ),
    touch: db.prepare('UPDATE mcp_handles SET last_used_at = ? WHERE handle = ?'),
    drop: db.prepare('DELETE FROM mcp_handles WHERE handle = ?'),
    sweep: db
      .prepare<[number], string>('DELETE FROM mcp_handles WHERE last_used_at < ? RETURNING handle')
      .pluck(),
    count: db
      .prepare<[string | null], number>('SELECT COUNT(*) FROM mcp_handles WHERE credential IS ?')
      .pluck(),
    dropOldest: db
      .prepare<[string | null, number], string>(
        `DELETE FROM mcp_handles WHERE handle IN (SELECT handle FROM mcp_handles WHERE credential IS ?
       ORDER BY last_used_at LIMIT ?) RETURNING handle`,
      )
      .pluck(),
  };
  return {
    insert: (handle, credential, at) => void q.insert.run(handle, credential, at, at),
    get: (handle) => q.get.get(handle),
    touch: (at, handle) => void q.touch.run(at, handle),
    drop: (handle) => void q.drop.run(handle),
    sweep: (before) => q.sweep.all(before),
    count: (credential) => q.count.get(credential) ?? 0,
    dropOldest: (credential, n) => q.dropOldest.all(credential, n),
  };
}

/** The handle table in SQLite (created if needed). */
export function createHandleStore(db: Db, opts: HandleOptions): HandleStore {
  return handleStore(sqliteHandleQueries(db), opts);
}

export interface HandleOptions {
  idleMs: number;
  now?: () => number;
  maxPerCredential?: number;
  /** Called with the handles just deleted (evicted or expired), so their gateway sessions go with them. */
  onDrop?: (handles: string[]) => void;
}

/** The handle table, on either database; `now` is injectable so expiry can be tested without waiting. */
export type HandleStore = ReturnType<typeof handleStore>;

/** Mint/resolve over `q`, whichever database answers it. */
export function handleStore(q: HandleQueries, opts: HandleOptions) {
  const max = opts.maxPerCredential ?? 10_000;
  const now = opts.now ?? Date.now;
  // A handle is a gateway session id: deleting one without its session left the session behind for good.
  const dropped = (handles: string[]) => {
    if (handles.length > 0) opts.onDrop?.(handles);
  };
  const idleText = describeDuration(opts.idleMs);
  return {
    /** How long an unused handle lives, for the tool's description. */
    idleText,
    /** A new handle bound to `credential` (null when the gateway has no tokens). */
    mint(credential: string | null): string {
      dropped(q.sweep(now() - opts.idleMs));
      // A bounded table per credential: the least recently used handles go first.
      const over = q.count(credential) - max + 1;
      if (over > 0) dropped(q.dropOldest(credential, over));
      const handle = `${FACE_SESSION_PREFIXES.handle}${randomBytes(16).toString('base64url')}`;
      q.insert(handle, credential, now());
      return handle;
    },
    /** Deletes the handles idle past their lifetime (retention runs this; mint() does too). */
    sweep(): number {
      const gone = q.sweep(now() - opts.idleMs);
      dropped(gone);
      return gone.length;
    },
    /** Checks that `handle` exists, is not idle-expired and belongs to `credential`; refreshes its lifetime. */
    use(handle: string, credential: string | null): string {
      const row = q.get(handle);
      if (!row) {
        throw new HandleError(
          `Unknown session handle ${JSON.stringify(handle)}. Call manage_toolsets with action ACTIVATE and no session to start a new one.`,
        );
      }
      if (now() - row.last_used_at > opts.idleMs) {
        q.drop(handle);
        dropped([handle]);
        throw new HandleError(
          `The session handle expired after ${idleText} without use. Call manage_toolsets with action ACTIVATE and no session to start a new one.`,
        );
      }
      if (row.credential !== credential) {
        // Said the same way as an unknown handle would be, minus the hint: another credential's handle is not ours to confirm.
        throw new HandleError(`Unknown session handle ${JSON.stringify(handle)} for this credential.`);
      }
      q.touch(now(), handle);
      return handle;
    },
  };
}

/** "24 hours", "90 minutes": a lifetime as a model should read it. */
function describeDuration(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes % 60 === 0) return `${minutes / 60} hour${minutes === 60 ? '' : 's'}`;
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}
