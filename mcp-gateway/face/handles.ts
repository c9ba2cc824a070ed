import { randomBytes } from 'node:crypto';
import { FACE_SESSION_PREFIXES } from '../contract.ts';
import type { HandleQueries } from '../store/interface.ts';

export type { HandleQueries };

// Session handles of the MCP face's modern leg (MCP 2026-07-28 has no protocol sessions: per-conversation
// state is a handle passed as a tool argument). A handle *is* a gateway session id, minted here with 128
// random bits, bound to the credential that minted it, and forgotten after an idle lifetime.

/** Why a handle cannot be used, in words the model (and its user) can act on. */
export class HandleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export interface HandleOptions {
  idleMs: number;
  now?: () => number;
  maxPerCredential?: number;
  /** Called with the handles just deleted (evicted or expired), so their gateway sessions go with them. */
  onDrop?: (handles: string[]) => Promise<void> | void;
}

/** The handle table, on either database; `now` is injectable so expiry can be tested without waiting. */
export type HandleStore = ReturnType<typeof handleStore>;

/** Mint/resolve over `q`, whichever database answers it. */
export function handleStore(q: HandleQueries, opts: HandleOptions) {
  const max = opts.maxPerCredential ?? 10_000;
  const now = opts.now ?? Date.now;
  // A handle is a gateway session id: deleting one without its session left the session behind for good.
  const dropped = async (handles: string[]) => {
    if (handles.length > 0) await opts.onDrop?.(handles);
  };
  const idleText = describeDuration(opts.idleMs);
  return {
    /** How long an unused handle lives, for the tool's description. */
    idleText,
    /** A new handle bound to `credential` (null when the gateway has no tokens). */
    async mint(credential: string | null): Promise<string> {
      await dropped(await q.sweep(now() - opts.idleMs));
      // A bounded table per credential: the least recently used handles go first.
      const over = (await q.count(credential)) - max + 1;
      if (over > 0) await dropped(await q.dropOldest(credential, over));
      const handle = `${FACE_SESSION_PREFIXES.handle}${randomBytes(16).toString('base64url')}`;
      await q.insert(handle, credential, now());
      return handle;
    },
    /** Deletes the handles idle past their lifetime (retention runs this; mint() does too). */
    async sweep(): Promise<number> {
      const gone = await q.sweep(now() - opts.idleMs);
      await dropped(gone);
      return gone.length;
    },
    /** Checks that `handle` exists, is not idle-expired and belongs to `credential`; refreshes its lifetime. */
    async use(handle: string, credential: string | null): Promise<string> {
      const row = await q.get(handle);
      if (!row) {
        throw new HandleError(
          `Unknown session handle ${JSON.stringify(handle)}. Call manage_toolsets with action ACTIVATE and no session to start a new one.`,
        );
      }
      if (now() - row.last_used_at > opts.idleMs) {
        await q.drop(handle);
        await dropped([handle]);
        throw new HandleError(
          `The session handle expired after ${idleText} without use. Call manage_toolsets with action ACTIVATE and no session to start a new one.`,
        );
      }
      if (row.credential !== credential) {
        // Said the same way as an unknown handle would be, minus the hint: another credential's handle is not ours to confirm.
        throw new HandleError(`Unknown session handle ${JSON.stringify(handle)} for this credential.`);
      }
      await q.touch(now(), handle);
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
