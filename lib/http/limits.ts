import { z } from 'zod';

// Part of the base every contract is written on, beside lib/http/contract.ts (scripts/check-boundaries.ts counts it as
// a contract: it imports only zod), since every service's contract bounds what it reads with the same numbers.
// Bounds on every list and string a client may send (all three services, and the MCP face's meta-tools), so
// no request can make a service hold, log or store more than a few KiB of it. Over a bound the request is
// refused with 400 naming the field (lib/http/issues.ts describeIssues prefixes the path), the limit and the size
// seen. Tool arguments are not bounded here: they are a tool's business, bounded by the 16 MiB body cap
// (MAX_BODY_BYTES) and the JSON depth limit (lib/http/json.ts).

/** The limits, in one place so README "Limits and retention" and the tests name the same numbers. */
export const LIMITS = {
  /** An id of a toolset, tool, prompt, task or approval (the id patterns allow 64; sessions 128). */
  id: 64,
  sessionId: 128,
  /** Ids in one request (toolset_ids, an approval's tools). */
  ids: 64,
  /** A task's goal. */
  goal: 64 * 1024,
  /** A human's reason for a decision. */
  reason: 2 * 1024,
  /** A tool call id a model chose (providers' ids are 20-60 characters). */
  callId: 256,
  /** A search query (manage_toolsets LIST, GET /mcp/admin/toolsets?query=). */
  query: 200,
  /** A playbook's arguments: how many, and each value. */
  promptArgs: 32,
  promptArgValue: 16 * 1024,
  /** A pagination cursor or a timestamp in a query string. */
  cursor: 128,
  /** A URL a client gives (a webhook's). */
  url: 2048,
} as const;

/** A string of at most `max` characters; over it: "at most 64 characters (got 70000)". */
export function boundedString(max: number) {
  return z.string().max(max, {
    error: (iss) => `at most ${max} characters (got ${(iss.input as string).length})`,
  });
}

/**
 * A list of at most `max` items of `item`. The length is checked before any item is, so 60,000 bad ids give
 * one short issue, not 60,000 of them.
 */
export function boundedList<T extends z.ZodType>(item: T, max: number) {
  return z
    .array(z.unknown())
    .max(max, { error: (iss) => `at most ${max} items (got ${(iss.input as unknown[]).length})` })
    .pipe(z.array(item));
}

/** A page size in a query string: 1 to `max`, `fallback` when absent; over it: "at most 500 (got 5000)". */
export function pageLimit(max: number, fallback: number) {
  return z.coerce
    .number()
    .int()
    .min(1)
    .max(max, { error: (iss) => `at most ${max} (got ${iss.input})` })
    .default(fallback);
}

/** An object of string keys of at most `maxKeys` entries of `value` (each key at most LIMITS.id characters). */
export function boundedRecord<T extends z.ZodType>(value: T, maxKeys: number) {
  return z
    .record(z.string(), z.unknown())
    .check((ctx) => {
      const n = Object.keys(ctx.value).length;
      if (n > maxKeys)
        ctx.issues.push({
          code: 'custom',
          message: `at most ${maxKeys} entries (got ${n})`,
          input: ctx.value,
          continue: false,
        });
    })
    .pipe(z.record(boundedString(LIMITS.id), value));
}
