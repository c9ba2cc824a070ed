import { HttpError } from '../lib/http/http.ts';
import type { ToolResult } from './contract.ts';

// The tool-server's own record of keyed calls (the gateway's Idempotency-Key): a repeat of a key joins the
// call while it runs and gets its outcome after, so a gateway that lost the tool-server's answer and asks again
// does not run the tool twice. Kept in memory, bounded and for a while only: the tool-server is one process
// per installation, and the durable record, shared by every gateway replica, is the gateway's own
// (mcp-gateway/store/call-keys.ts); this one covers the hop between the gateway and the tool-server.

/** How many keys are kept at most (the oldest go first). */
export const CALL_RECORD_MAX = 10_000;
/** How long a key is kept after its call started. */
export const CALL_RECORD_TTL_MS = 60 * 60 * 1000;

export interface CallRecord {
  /** Runs `start` once per key: a repeat of `key` gets the same outcome (for the same tool only). */
  run(key: string, tool: string, start: () => Promise<ToolResult>): Promise<ToolResult>;
  readonly size: number;
}

export function createCallRecord(
  opts: { max?: number; ttlMs?: number; now?: () => number } = {},
): CallRecord {
  const max = opts.max ?? CALL_RECORD_MAX;
  const ttlMs = opts.ttlMs ?? CALL_RECORD_TTL_MS;
  const now = opts.now ?? Date.now;
  const calls = new Map<string, { tool: string; at: number; outcome: Promise<ToolResult> }>();
  const sweep = () => {
    // In insertion order, so the oldest come first: stop at the first one still fresh.
    for (const [key, entry] of calls) {
      if (calls.size <= max && now() - entry.at < ttlMs) break;
      calls.delete(key);
    }
  };
  return {
    run(key, tool, start) {
      sweep();
      const known = calls.get(key);
      if (known) {
        if (known.tool !== tool)
          throw new HttpError(
            409,
            `The idempotency key ${key} was used for ${known.tool}; a key names one call`,
          );
        return known.outcome;
      }
      const outcome = start();
      calls.set(key, { tool, at: now(), outcome });
      // Refused before it ran (bad arguments, an unknown tool): the key is free again.
      outcome.catch(() => {
        if (calls.get(key)?.outcome === outcome) calls.delete(key);
      });
      return outcome;
    },
    get size() {
      return calls.size;
    },
  };
}
