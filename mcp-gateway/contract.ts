import { z } from 'zod';
import { DatabaseHealth, type EventStream } from '../lib/http/contract.ts';
import { boundedString, LIMITS, pageLimit } from '../lib/http/limits.ts';
import { ErrorBody, Health, ToolResult } from '../tool-server/contract.ts';
import { accountRoutes } from './contract/accounts.ts';
import { SessionId, ToolsetId } from './contract/base.ts';
import { identityRoutes } from './contract/identity.ts';
import {
  Approval,
  ApproveToolsetRequest,
  ApproveToolsetResponse,
  AUDIT_PAGE_MAX,
  AuditPage,
  AuditSearch,
  DecideApprovalRequest,
  PolicyInfo,
  PromptInfo,
  ReloadResponse,
  RenderedPrompt,
  RenderPromptRequest,
} from './contract/operator.ts';
import {
  AnnounceFenceRequest,
  AnnounceFenceResponse,
  CallToolRequest,
  ChangeDefaultsRequest,
  ChangeDefaultsResponse,
  ChangeToolsetsRequest,
  ChangeToolsetsResponse,
  GatewayTool,
  ListToolsetsQuery,
  ListToolsetsResponse,
  ListToolsQuery,
  ListToolsResponse,
  ManageToolsetsRequest,
  ManageToolsetsResponse,
} from './contract/toolsets.ts';

// The gateway's HTTP API. The seed's `POST /mcp/admin/toolsets {action, toolset_ids}` works unchanged.

export * from './contract/accounts.ts';
export * from './contract/base.ts';
export * from './contract/identity.ts';
export type * from './contract/local.ts';
export * from './contract/operator.ts';
export * from './contract/toolsets.ts';
export { ToolResult };

/**
 * A call's outcome at the gateway: the tool's result and, when the call activated the tool's toolset on the
 * way (activation without a turn, AUTO_ACTIVATE), that activation as manage_toolsets would have answered it.
 */
export const CallToolResponse = ToolResult.extend({ activated: ManageToolsetsResponse.optional() });
export type CallToolResponse = z.infer<typeof CallToolResponse>;

/** The routes, used both to validate requests and to generate /openapi.json. */
export const gatewayRoutes = {
  ...identityRoutes,
  ...accountRoutes,
  getPolicy: {
    method: 'get',
    path: '/mcp/admin/policy',
    roles: ['admin'],
    summary: 'The operator policy in force (POLICY_FILE)',
    responses: { 200: PolicyInfo },
  },
  reloadPolicy: {
    method: 'post',
    path: '/mcp/admin/policy/reload',
    roles: ['admin'],
    summary: 'Re-read POLICY_FILE; a malformed file is refused and the running policy stays',
    responses: { 200: PolicyInfo, 400: ErrorBody },
  },
  listApprovals: {
    method: 'get',
    path: '/mcp/admin/approvals',
    roles: ['admin', 'approver', 'viewer'],
    summary: 'Approvals, newest first (status=pending for the open ones)',
    query: z.object({
      status: z.enum(['pending', 'approved', 'denied', 'expired', 'used']).optional(),
      session_id: SessionId.optional(),
      limit: pageLimit(500, 50),
    }),
    responses: { 200: z.object({ approvals: z.array(Approval) }) },
  },
  getApproval: {
    method: 'get',
    path: '/mcp/admin/approvals/{id}',
    roles: ['admin', 'approver', 'agent', 'viewer'],
    summary: 'One approval (the agent-server waits on its status)',
    params: z.object({ id: z.string().min(1).max(64) }),
    responses: { 200: Approval, 404: ErrorBody },
  },
  decideApproval: {
    method: 'post',
    path: '/mcp/admin/approvals/{id}',
    roles: ['admin', 'approver'],
    summary: 'Approve or deny a pending approval',
    params: z.object({ id: z.string().min(1).max(64) }),
    body: DecideApprovalRequest,
    responses: { 200: Approval, 404: ErrorBody, 409: ErrorBody },
  },
  listAudit: {
    method: 'get',
    path: '/mcp/admin/audit',
    roles: ['admin', 'approver', 'viewer'],
    summary:
      'The audit trail, newest first, a page at a time (pass next_cursor as cursor): toolset changes, refused ' +
      'and approved calls, operator changes',
    query: AuditSearch.extend({
      /** The `next_cursor` of the previous page: rows older than it (keyset paging, fast on any table size). */
      cursor: boundedString(LIMITS.cursor)
        .pipe(z.string().regex(/^[1-9][0-9]{0,15}$/, 'must be the next_cursor of an earlier page'))
        .optional(),
      limit: pageLimit(AUDIT_PAGE_MAX, 100),
    }),
    responses: { 200: AuditPage },
  },
  exportAudit: {
    method: 'get',
    path: '/mcp/admin/audit/export',
    roles: ['admin', 'approver', 'viewer'],
    summary:
      'Every audit row the filters match, newest first, as JSON lines (one row per line, streamed a page at a time)',
    query: AuditSearch,
    produces: 'application/x-ndjson',
    responses: { 200: z.string() },
  },
  listPrompts: {
    method: 'get',
    path: '/mcp/prompts',
    roles: ['admin', 'agent', 'mcp', 'approver', 'viewer'],
    summary: 'The playbook prompts (PROMPTS_DIR) with their arguments',
    responses: { 200: z.object({ prompts: z.array(PromptInfo) }) },
  },
  renderPrompt: {
    method: 'post',
    path: '/mcp/prompts/{name}/render',
    roles: ['admin', 'agent', 'mcp'],
    summary: 'Render a playbook with its arguments (unknown or missing ones are refused)',
    params: z.object({ name: z.string().min(1).max(64) }),
    body: RenderPromptRequest,
    responses: { 200: RenderedPrompt, 400: ErrorBody, 404: ErrorBody },
  },
  changeToolsets: {
    method: 'post',
    path: '/mcp/admin/toolsets',
    roles: ['admin', 'agent'],
    summary:
      "Activate/deactivate toolsets in a session (default: 'default'), or enable/disable them globally",
    body: ChangeToolsetsRequest,
    responses: {
      200: ChangeToolsetsResponse,
      400: ErrorBody,
      401: ErrorBody,
      403: ErrorBody,
      409: ErrorBody,
      429: ErrorBody,
      502: ErrorBody,
    },
  },
  changeDefaults: {
    method: 'post',
    path: '/mcp/admin/defaults',
    roles: ['admin'],
    summary:
      'Set which toolsets new sessions start with (ACTIVATE adds, DEACTIVATE removes); sessions that never changed their toolsets follow it',
    body: ChangeDefaultsRequest,
    responses: { 200: ChangeDefaultsResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody },
  },
  approveToolset: {
    method: 'post',
    path: '/mcp/admin/toolsets/{id}/approve',
    roles: ['admin'],
    summary:
      "Approve an upstream toolset's withheld tools by the hashes the listing showed; a definition changed since stays withheld",
    params: z.object({ id: ToolsetId }),
    body: ApproveToolsetRequest,
    responses: {
      200: ApproveToolsetResponse,
      400: ErrorBody,
      401: ErrorBody,
      404: ErrorBody,
      409: ErrorBody,
    },
  },
  reloadToolsets: {
    method: 'post',
    path: '/mcp/admin/reload',
    roles: ['admin'],
    summary:
      'Re-read POLICY_FILE, PROMPTS_DIR, TOOLSETS_DIR and USER_TOOLSETS_DIR: load what is new (servers start on first use), drop what is gone, skip a toolset whose names collide and each user toolset or prompt file that does not load (named in warnings; a policy that does not load is a warning and the running one stays); an invalid shipped directory changes nothing',
    responses: { 200: ReloadResponse, 400: ErrorBody, 401: ErrorBody },
  },
  listToolsets: {
    method: 'get',
    path: '/mcp/admin/toolsets',
    roles: ['admin', 'agent', 'approver', 'viewer'],
    summary: 'The toolset catalog with each toolset’s state in a session',
    query: ListToolsetsQuery,
    responses: { 200: ListToolsetsResponse, 400: ErrorBody, 401: ErrorBody },
  },
  toolsetTools: {
    method: 'get',
    path: '/mcp/admin/toolsets/{id}/tools',
    roles: ['admin', 'agent', 'approver', 'viewer'],
    summary:
      "A toolset's tool definitions as the gateway offers them (names, descriptions, input schemas); an upstream toolset's are known once its server has listed them",
    params: z.object({ id: ToolsetId }),
    responses: {
      200: z.object({ toolset: z.string(), tools: z.array(GatewayTool) }),
      401: ErrorBody,
      404: ErrorBody,
    },
  },
  manageToolsets: {
    method: 'post',
    path: '/mcp/manage_toolsets',
    roles: ['admin', 'agent'],
    summary: 'Run the manage_toolsets meta-tool for a session with a model’s raw arguments',
    body: ManageToolsetsRequest,
    responses: {
      200: ManageToolsetsResponse,
      400: ErrorBody,
      401: ErrorBody,
      403: ErrorBody,
      409: ErrorBody,
      429: ErrorBody,
      502: ErrorBody,
    },
  },
  listTools: {
    method: 'get',
    path: '/mcp/tools',
    roles: ['admin', 'agent'],
    summary: 'The definitions of the tools active in a session, in a stable order',
    query: ListToolsQuery,
    responses: { 200: ListToolsResponse, 400: ErrorBody },
  },
  callTool: {
    method: 'post',
    path: '/mcp/tools/{name}/call',
    roles: ['admin', 'agent'],
    summary: 'Call a tool of a toolset active in the session',
    // Any name is accepted here, so a model's misspelt tool gets "unknown tool, these are active" (404).
    params: z.object({ name: z.string().min(1).max(256) }),
    body: CallToolRequest,
    responses: {
      200: CallToolResponse,
      400: ErrorBody,
      403: ErrorBody,
      404: ErrorBody,
      409: ErrorBody,
      429: ErrorBody,
      502: ErrorBody,
    },
  },
  announceFence: {
    method: 'post',
    path: '/mcp/tasks/{task_id}/fence',
    roles: ['admin', 'agent'],
    summary:
      "A worker that took a task over announces the task's new fencing number: calls sent under a lower one are refused from then",
    params: z.object({ task_id: SessionId }),
    body: AnnounceFenceRequest,
    responses: { 200: AnnounceFenceResponse, 400: ErrorBody, 409: ErrorBody },
  },
  health: {
    method: 'get',
    path: '/health',
    summary:
      'Liveness and backend health; status `degraded` while PostgreSQL (DATABASE_URL) is unreachable, and with a token since when and why',
    responses: {
      200: Health.extend({ status: z.enum(['ok', 'degraded']), database: DatabaseHealth.optional() }),
      503: ErrorBody,
    },
  },
  metrics: {
    method: 'get',
    path: '/metrics',
    summary:
      'Prometheus metrics (text exposition format); needs a gateway token when they are set, like every route',
    produces: 'text/plain',
    responses: { 200: z.string() },
  },
} as const;

/** The session the admin API acts on when a request names none. */
export const DEFAULT_SESSION = 'default';

/** A JSON-RPC 2.0 message (MCP's framing): a request, a notification, or a response. */
export const JsonRpcMessage = z.looseObject({
  jsonrpc: z.literal('2.0'),
  id: z.union([z.string(), z.number()]).optional(),
  method: z.string().optional(),
  params: z.looseObject({}).optional(),
  result: z.looseObject({}).optional(),
  error: z.looseObject({ code: z.number(), message: z.string() }).optional(),
});

const McpHeaders = z.object({
  'mcp-session-id': z
    .string()
    .optional()
    .describe('The session a 2025-era client was given at initialize (the 2026 protocol has none)'),
  'mcp-protocol-version': z.string().optional().describe('The protocol version negotiated at initialize'),
});

/** What the MCP face streams when it answers with an event stream: JSON-RPC messages. */
const McpStream: EventStream = {
  description: 'JSON-RPC messages from the server: the answer to the request, and notifications before it.',
  idDescription: 'An event id, for a 2025-era client resuming its stream',
  events: { message: JsonRpcMessage },
};

/**
 * The MCP face (face/face.ts), described for /openapi.json: its messages are MCP's, checked by the MCP SDK
 * rather than by route(), so these are documentation only. A POST answers with JSON or an event stream of
 * JSON-RPC messages, as the client's Accept allows.
 */
export const mcpFaceRoutes = {
  mcpPost: {
    method: 'post',
    path: '/mcp',
    roles: ['mcp', 'admin'],
    summary:
      'Send an MCP message (Streamable HTTP, 2026 or 2025 era): tools/list gives manage_toolsets and call_tool, and the tools of the session’s active toolsets',
    headers: McpHeaders,
    body: JsonRpcMessage,
    stream: McpStream,
    responses: {
      200: JsonRpcMessage,
      202: z.looseObject({}),
      400: JsonRpcMessage,
      404: JsonRpcMessage,
      503: ErrorBody,
    },
  },
  mcpGet: {
    method: 'get',
    path: '/mcp',
    roles: ['mcp', 'admin'],
    summary: 'Open a 2025-era session’s stream of server messages (list-changed notifications)',
    headers: McpHeaders,
    produces: 'text/event-stream',
    stream: McpStream,
    responses: { 200: z.string(), 400: JsonRpcMessage, 404: JsonRpcMessage, 405: JsonRpcMessage },
  },
  mcpDelete: {
    method: 'delete',
    path: '/mcp',
    roles: ['mcp', 'admin'],
    summary: 'End a 2025-era session',
    headers: McpHeaders,
    responses: { 200: z.looseObject({}), 400: JsonRpcMessage, 404: JsonRpcMessage, 405: JsonRpcMessage },
  },
  mcpViewPost: {
    method: 'post',
    path: '/mcp/toolsets/{ids}',
    roles: ['mcp', 'admin'],
    summary:
      'Send an MCP message to a fixed view: the tools of the comma-separated toolsets, activated for it, and no manage_toolsets',
    params: z.object({ ids: z.string().describe('Toolset ids, comma-separated') }),
    headers: McpHeaders,
    body: JsonRpcMessage,
    stream: McpStream,
    responses: { 200: JsonRpcMessage, 202: z.looseObject({}), 400: JsonRpcMessage, 404: ErrorBody },
  },
} as const;
