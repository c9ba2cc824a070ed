import { z } from 'zod';
import { ErrorBody } from '../lib/contract.ts';

// The tool-server's HTTP API. Consumers (the gateway) import this file and nothing else of the service.

/** Safety hints a tool declares about itself (MCP's names), so clients can filter or warn. */
export const ToolAnnotations = z.object({
  title: z.string().optional(),
  readOnlyHint: z.boolean(),
  destructiveHint: z.boolean(),
  idempotentHint: z.boolean().optional(),
  openWorldHint: z.boolean().optional(),
});
export type ToolAnnotations = z.infer<typeof ToolAnnotations>;

/** A tool as offered to a model: `parameters` is its JSON Schema. */
export const ToolDefinition = z.object({
  name: z.string(),
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()),
  annotations: ToolAnnotations,
});
export type ToolDefinition = z.infer<typeof ToolDefinition>;

/** The outcome of one tool call; a tool's own failure is `success: false`, never an HTTP error. */
export const ToolResult = z.object({
  success: z.boolean(),
  result: z.unknown(),
  error: z.string().optional(),
  execution_time_ms: z.number(),
});
export type ToolResult = z.infer<typeof ToolResult>;

// Bounds on every list and string a client may send (all three services, and the MCP face's meta-tools), so
// no request can make a service hold, log or store more than a few KiB of it. Over a bound the request is
// refused with 400 naming the field (lib/issues.ts describeIssues prefixes the path), the limit and the size
// seen. Tool arguments are not bounded here: they are a tool's business, bounded by the 16 MiB body cap
// (MAX_BODY_BYTES) and the JSON depth limit (lib/json.ts).

/** The header carrying a call's idempotency key, gateway to tool-server. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** The `_meta` field carrying a call's idempotency key to an upstream MCP server. */
export const IDEMPOTENCY_META = 'io.toolshift/idempotency-key';

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

export { ErrorBody };

export const Health = z.looseObject({ status: z.literal('ok') });

export const ToolName = z.string().regex(/^[a-z0-9_]{1,64}$/, 'must match ^[a-z0-9_]{1,64}$');

/**
 * Whose call it is: the gateway's session, URI-encoded. The tool-server's shared pools (the database's query
 * processes) serve waiting sessions in turn with it, so one session's flood does not hold the others back.
 */
export const SESSION_HEADER = 'x-toolshift-session';

/** The routes, used both to validate requests and to generate /openapi.json. */
export const toolServerRoutes = {
  listTools: {
    method: 'get',
    path: '/tools',
    summary: 'List the native tools with their JSON Schemas and annotations',
    responses: { 200: z.array(ToolDefinition) },
  },
  callTool: {
    method: 'post',
    path: '/tools/{name}',
    summary:
      'Run a tool; the body is its arguments. With an Idempotency-Key header a repeat of the key (within its TTL) gets the first call’s outcome instead of a second run',
    params: z.object({ name: ToolName }),
    headers: z.looseObject({
      [SESSION_HEADER]: z.string().min(1).max(1024).optional(),
      [IDEMPOTENCY_HEADER]: z
        .string()
        .regex(/^[\x21-\x7e]{1,512}$/, 'must be 1-512 printable ASCII characters without spaces')
        .optional(),
    }),
    body: z.record(z.string(), z.unknown()).optional(),
    responses: { 200: ToolResult, 400: ErrorBody, 404: ErrorBody },
  },
  health: {
    method: 'get',
    path: '/health',
    summary: 'Liveness',
    responses: { 200: Health },
  },
  metrics: {
    method: 'get',
    path: '/metrics',
    summary:
      'Prometheus metrics (text exposition format); needs TOOL_SERVER_TOKEN when it is set, like every route',
    produces: 'text/plain',
    responses: { 200: z.string() },
  },
} as const;
