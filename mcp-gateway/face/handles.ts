import { randomBytes } from 'node:crypto';
import type { Db } from '../../lib/sqlite.ts';

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

/** The handle table; `now` is injectable so expiry can be tested without waiting. */
export type HandleStore = ReturnType<typeof createHandleStore>;

/** Creates the table if needed and returns mint/resolve over it. */
export function createHandleStore(
  db: Db,
  opts: {
    idleMs: number;
    now?: () => number;
    maxPerCredential?: number;
    /** Called with the handles just deleted (evicted or expired), so their gateway sessions go with them. */
    onDrop?: (handles: string[]) => void;
  },
) {
  const max = opts.maxPerCredential ?? 10_000;
  db.exec(SCHEMA);
  const now = opts.now ?? Date.now;
  const q = {
    insert: db.prepare(
      'INSERT INTO mcp_handles (handle, credential, created_at, last_used_at) VALUES (?, ?, ?, ?)',
    ),
    get: db.prepare<[string], { credential: string | null; last_used_at: number }>(
      'SELECT credential, last_used_at FROM mcp_handles WHERE handle = ?',
    ),
    touch: db.prepare('UPDATE mcp_handles SET last_used_at = ? WHERE handle = ?'),
    drop: db.prepare('DELETE FROM mcp_handles WHERE handle = ?'),
    sweep: db.prepare<[number], { handle: string }>(
      'DELETE FROM mcp_handles WHERE last_used_at < ? RETURNING handle',
    ),
    count: db.prepare<[string | null], { n: number }>(
      'SELECT COUNT(*) AS n FROM mcp_handles WHERE credential IS ?',
    ),
    dropOldest: db.prepare<[string | null, number], { handle: string }>(
      `DELETE FROM mcp_handles WHERE handle IN (SELECT handle FROM mcp_handles WHERE credential IS ?
       ORDER BY last_used_at LIMIT ?) RETURNING handle`,
    ),
  };
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
      dropped(q.sweep.all(now() - opts.idleMs).map((r) => r.handle));
      // A bounded table per credential: the least recently used handles go first.
      const over = (q.count.get(credential) as { n: number }).n - max + 1;
      if (over > 0) dropped(q.dropOldest.all(credential, over).map((r) => r.handle));
      const handle = `mcp_${randomBytes(16).toString('base64url')}`;
      q.insert.run(handle, credential, now(), now());
      return handle;
    },
    /** Deletes the handles idle past their lifetime (retention runs this; mint() does too). */
    sweep(): number {
      const gone = q.sweep.all(now() - opts.idleMs).map((r) => r.handle);
      dropped(gone);
      return gone.length;
    },
    /** Checks that `handle` exists, is not idle-expired and belongs to `credential`; refreshes its lifetime. */
    use(handle: string, credential: string | null): string {
      const row = q.get.get(handle);
      if (!row) {
        throw new HandleError(
          `Unknown session handle ${JSON.stringify(handle)}. Call manage_toolsets with action ACTIVATE and no session to start a new one.`,
        );
      }
      if (now() - row.last_used_at > opts.idleMs) {
        q.drop.run(handle);
        dropped([handle]);
        throw new HandleError(
          `The session handle expired after ${idleText} without use. Call manage_toolsets with action ACTIVATE and no session to start a new one.`,
        );
      }
      if (row.credential !== credential) {
        // Said the same way as an unknown handle would be, minus the hint: another credential's handle is not ours to confirm.
        throw new HandleError(`Unknown session handle ${JSON.stringify(handle)} for this credential.`);
      }
      q.touch.run(now(), handle);
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
