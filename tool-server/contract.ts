import { z } from 'zod';
import { ErrorBody } from '../lib/http/contract.ts';

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

/**
 * A tool as offered to a model: `parameters` is the JSON Schema of its arguments, `outputSchema` that of a
 * successful call's `result` (every native tool has one; a backend's tool that declares none has none).
 */
export const ToolDefinition = z.object({
  name: z.string(),
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()),
  outputSchema: z.record(z.string(), z.unknown()).optional(),
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

/** The header carrying a call's idempotency key, gateway to tool-server. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** The `_meta` field carrying a call's idempotency key to an upstream MCP server. */
export const IDEMPOTENCY_META = 'io.toolshift/idempotency-key';

export { ErrorBody };

export const Health = z.looseObject({ status: z.literal('ok') });

export const ToolName = z.string().regex(/^[a-z0-9_]{1,64}$/, 'must match ^[a-z0-9_]{1,64}$');

/**
 * Whose call it is: the gateway's session, URI-encoded. The tool-server's shared pools (the database's query
 * processes) serve waiting sessions in turn with it, so one session's flood does not hold the others back.
 */
export const SESSION_HEADER = 'x-toolshift-session';

/**
 * The tool-server called in the same process (start/stack.ts hands it to the gateway there): its two working
 * routes without a socket. `session` is the gateway session as SESSION_HEADER carries it, `key` an
 * IDEMPOTENCY_HEADER; a refusal is thrown as the ServiceError an HTTP client would make of the answer.
 */
export interface ToolServerLocal {
  listTools(): Promise<ToolDefinition[]>;
  callTool(
    name: string,
    args: Record<string, unknown>,
    call?: { session?: string; key?: string },
  ): Promise<ToolResult>;
}

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
