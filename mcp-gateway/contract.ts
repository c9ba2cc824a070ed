import { z } from 'zod';
import { ErrorBody, Health, ToolAnnotations, ToolResult } from '../tool-server/contract.ts';

// The gateway's HTTP API. The seed's `POST /mcp/admin/toolsets {action, toolset_ids}` works unchanged.

export { ToolResult };

export const SessionId = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'must be 1-128 characters of letters, digits, _ . : -');

export const ToolsetId = z.string().regex(/^[a-z0-9_]{1,64}$/, 'must match ^[a-z0-9_]{1,64}$');

/** ACTIVATE/DEACTIVATE act on one session; ENABLE/DISABLE set the operator's global ceiling. */
export const ToolsetAction = z.enum(['ACTIVATE', 'DEACTIVATE', 'ENABLE', 'DISABLE']);

export const ChangeToolsetsRequest = z.object({
  action: ToolsetAction,
  toolset_ids: z.array(z.string()).min(1, 'give at least one toolset id'),
  session_id: SessionId.optional(),
});
export type ChangeToolsetsRequest = z.infer<typeof ChangeToolsetsRequest>;

export const ChangeToolsetsResponse = z.object({
  session_id: z.string(),
  active_toolsets: z.array(z.string()),
  /** Names of the tools now offered in the session, in their stable order. */
  tools: z.array(z.string()),
  added_tools: z.array(z.string()),
  removed_tools: z.array(z.string()),
  /** Ids the action had no effect on (already active, already inactive …). */
  unchanged: z.array(z.string()),
});
export type ChangeToolsetsResponse = z.infer<typeof ChangeToolsetsResponse>;

export const ToolsetInfo = z.object({
  id: z.string(),
  description: z.string(),
  tools: z.array(z.string()),
  enabled: z.boolean(),
  active: z.boolean(),
  default: z.boolean(),
});
export type ToolsetInfo = z.infer<typeof ToolsetInfo>;

export const ListToolsetsQuery = z.object({
  session_id: SessionId.optional(),
  /** Words matched against toolset ids, descriptions, and their tools' names and descriptions. */
  query: z.string().max(200).optional(),
});

export const ListToolsetsResponse = z.object({ session_id: z.string(), toolsets: z.array(ToolsetInfo) });
export type ListToolsetsResponse = z.infer<typeof ListToolsetsResponse>;

/** A tool as the gateway offers it: the backend's definition plus the toolset that brought it. */
export const GatewayTool = z.object({
  name: z.string(),
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()),
  annotations: ToolAnnotations,
  toolset: z.string(),
});
export type GatewayTool = z.infer<typeof GatewayTool>;

export const ListToolsQuery = z.object({ session_id: SessionId.optional() });
export const ListToolsResponse = z.object({ session_id: z.string(), tools: z.array(GatewayTool) });

export const CallToolRequest = z.object({
  session_id: SessionId.optional(),
  arguments: z.record(z.string(), z.unknown()).default({}),
});

/** The routes, used both to validate requests and to generate /openapi.json. */
export const gatewayRoutes = {
  changeToolsets: {
    method: 'post',
    path: '/mcp/admin/toolsets',
    summary:
      "Activate/deactivate toolsets in a session (default: 'default'), or enable/disable them globally",
    body: ChangeToolsetsRequest,
    responses: { 200: ChangeToolsetsResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody },
  },
  listToolsets: {
    method: 'get',
    path: '/mcp/admin/toolsets',
    summary: 'The toolset catalog with each toolset’s state in a session',
    query: ListToolsetsQuery,
    responses: { 200: ListToolsetsResponse, 400: ErrorBody, 401: ErrorBody },
  },
  listTools: {
    method: 'get',
    path: '/mcp/tools',
    summary: 'The definitions of the tools active in a session, in a stable order',
    query: ListToolsQuery,
    responses: { 200: ListToolsResponse, 400: ErrorBody },
  },
  callTool: {
    method: 'post',
    path: '/mcp/tools/{name}/call',
    summary: 'Call a tool of a toolset active in the session',
    // Any name is accepted here, so a model's misspelt tool gets "unknown tool, these are active" (404).
    params: z.object({ name: z.string().min(1).max(256) }),
    body: CallToolRequest,
    responses: { 200: ToolResult, 400: ErrorBody, 403: ErrorBody, 404: ErrorBody, 502: ErrorBody },
  },
  health: {
    method: 'get',
    path: '/health',
    summary: 'Liveness and backend health',
    responses: { 200: Health, 503: ErrorBody },
  },
} as const;

/** The session the admin API acts on when a request names none. */
export const DEFAULT_SESSION = 'default';
