import { z } from 'zod';
import {
  boundedList,
  boundedRecord,
  boundedString,
  ErrorBody,
  Health,
  LIMITS,
  pageLimit,
  ToolAnnotations,
  ToolResult,
} from '../tool-server/contract.ts';

// The gateway's HTTP API. The seed's `POST /mcp/admin/toolsets {action, toolset_ids}` works unchanged.

export { ToolResult };

export const SessionId = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'must be 1-128 characters of letters, digits, _ . : -');

export const ToolsetId = z.string().regex(/^[a-z0-9_]{1,64}$/, 'must match ^[a-z0-9_]{1,64}$');

/** ACTIVATE/DEACTIVATE act on one session; ENABLE/DISABLE set the operator's global ceiling. */
export const ToolsetAction = z.enum(['ACTIVATE', 'DEACTIVATE', 'ENABLE', 'DISABLE']);

export const ChangeToolsetsRequest = z.strictObject({
  action: ToolsetAction,
  toolset_ids: boundedList(boundedString(LIMITS.id), LIMITS.ids).refine((ids) => ids.length > 0, {
    message: 'give at least one toolset id',
  }),
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

/** The header naming the task a request acts for (agent-server to gateway), so the audit says "model in task X". */
export const TASK_HEADER = 'x-toolshift-task';

/**
 * Why the gateway refused: the `code` of every refusal's error body, so a client branches on meaning, not on an
 * HTTP status (the REST routes map each code to one status; the MCP face turns a refusal into a tool error).
 */
export const RefusalCode = z.enum([
  /** The request's own arguments are wrong (a tool's, manage_toolsets', an approval's). */
  'invalid_arguments',
  /** A toolset file, the policy or the catalog as reloaded is invalid: nothing changed. */
  'invalid_config',
  /** A toolset id named in the request does not exist. */
  'unknown_toolset',
  /** No tool of that name is served. */
  'unknown_tool',
  /** The id in the path (an approval, a toolset) does not exist. */
  'not_found',
  /** The tool's toolset is not active in the session. */
  'inactive',
  /** The operator disabled the toolset. */
  'disabled',
  /** The operator's policy denies it. */
  'denied',
  /** An upstream tool is held back until an operator approves its definition (rug-pull protection). */
  'withheld',
  /** The operator's policy asks a human first: the body carries the pending `approval`. */
  'approval_needed',
  /** Activating would pass TOOL_TOKEN_BUDGET. */
  'over_budget',
  /** A limit of calls or activations; `retry_after_s` says when, where waiting helps. */
  'rate_limited',
  /** The state changed since the request was prepared (an approval already decided, a definition changed). */
  'conflict',
  /** An upstream server cannot serve the toolset right now (it failed to start or to list its tools). */
  'unavailable',
  /** The backend (tool-server or upstream) failed while running the call. */
  'upstream_failed',
]);
export type RefusalCode = z.infer<typeof RefusalCode>;

/** A refusal as it travels over HTTP. */
export const RefusalBody = ErrorBody.extend({ code: RefusalCode.optional() });

/** Which toolsets new sessions start with: the user's defaults over the toolset files' `default`. */
export const ChangeDefaultsRequest = z.strictObject({
  action: z.enum(['ACTIVATE', 'DEACTIVATE']),
  toolset_ids: ChangeToolsetsRequest.shape.toolset_ids,
});
export type ChangeDefaultsRequest = z.infer<typeof ChangeDefaultsRequest>;

export const ChangeDefaultsResponse = z.object({
  /** The toolsets every new session (task, MCP client) now starts with. */
  default_toolsets: z.array(z.string()),
  /** Ids the action had no effect on (already a default, already not). */
  unchanged: z.array(z.string()),
});
export type ChangeDefaultsResponse = z.infer<typeof ChangeDefaultsResponse>;

export const ToolsetInfo = z.object({
  id: z.string(),
  description: z.string(),
  tools: z.array(z.string()),
  enabled: z.boolean(),
  active: z.boolean(),
  default: z.boolean(),
  /** `tool-server`, or the upstream MCP server as its file says (with `${VAR}`, never the values). */
  backend: z.union([z.string(), z.object({ mcp: z.record(z.string(), z.unknown()) })]).optional(),
  /** Upstream toolsets: `idle` until first use, `down` after a crash or failed connect (with the reason). */
  health: z.enum(['idle', 'connecting', 'up', 'down', 'error']).optional(),
  health_reason: z.string().optional(),
  /** Upstream tools held back until an operator approves them (rug-pull protection). */
  withheld: z
    .array(
      z.object({
        name: z.string(),
        status: z.enum(['changed', 'new']),
        /** The withheld definition's hash (SHA-256 of its canonical JSON): what an approval must name. */
        hash: z.string(),
        /** The definition as offered now (its JSON), for review. */
        definition: z.record(z.string(), z.unknown()),
        diff: z.string().optional(),
      }),
    )
    .optional(),
  /** With a query: this toolset's tools that matched, best first. */
  matched_tools: z.array(z.string()).optional(),
  /** What this toolset's tool definitions cost a model request, in tokens (TOKENIZER); absent until listed. */
  definition_tokens: z.number().optional(),
});
export type ToolsetInfo = z.infer<typeof ToolsetInfo>;

export const ListToolsetsQuery = z.object({
  session_id: SessionId.optional(),
  /** A plain-language need; toolsets come back ranked (ids, descriptions, tool names and descriptions). */
  query: boundedString(LIMITS.query).optional(),
});

export const ListToolsetsResponse = z.object({ session_id: z.string(), toolsets: z.array(ToolsetInfo) });
export type ListToolsetsResponse = z.infer<typeof ListToolsetsResponse>;

/** A tool as the gateway offers it: the backend's definition plus the toolset that brought it. */
export const GatewayTool = z.object({
  name: z.string(),
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()),
  /** Native tools declare all hints; an upstream MCP tool's annotations are passed on as the server gave them. */
  annotations: ToolAnnotations.partial().loose(),
  toolset: z.string(),
});
export type GatewayTool = z.infer<typeof GatewayTool>;

export const ListToolsQuery = z.object({ session_id: SessionId.optional() });
export const ListToolsResponse = z.object({ session_id: z.string(), tools: z.array(GatewayTool) });

export const CallToolRequest = z.object({
  session_id: SessionId.optional(),
  // A tool's own business: bounded by the body cap (MAX_BODY_BYTES) and the JSON depth limit, not here.
  arguments: z.record(z.string(), z.unknown()).default({}),
});

/** The meta-tool's name: the one tool every model (the agent's, an MCP client's) starts with. */
export const MANAGE_TOOLSETS = 'manage_toolsets';

/**
 * The meta-tool's definition, served as-is to the agent's model and (later) on the MCP face, so both
 * see the same tool. Unknown fields are refused (additionalProperties: false), here and by the gateway.
 */
export const manageToolsetsDefinition = {
  name: MANAGE_TOOLSETS,
  description:
    'Activates or deactivates sets of tools to manage context and capabilities. Use this to acquire new tools ' +
    'for a task or to dismiss tools that are no longer needed. LIST shows the toolsets (optionally only those ' +
    'matching a query) with their tools and whether each is active.',
  parameters: {
    type: 'object',
    properties: {
      action: {
        type: 'string',
        enum: ['ACTIVATE', 'DEACTIVATE', 'LIST'],
        description: 'The action to perform.',
      },
      toolset_ids: {
        type: 'array',
        items: { type: 'string' },
        description: "A list of toolset identifiers to act upon (e.g., 'web_tools'). Use [] with LIST.",
      },
      query: {
        type: 'string',
        description: 'LIST only: words describing what you need; the best-matching toolsets come first.',
      },
    },
    required: ['action', 'toolset_ids'],
    additionalProperties: false,
  },
} as const;

/** The dispatcher's name: with it a model runs any tool of an active toolset without it being in its tools array. */
export const CALL_TOOL = 'call_tool';

/**
 * The dispatcher (TOOL_EXPOSURE=dispatch, and the MCP face's modern leg, which adds its `session` handle): one
 * definition, so the agent's model and MCP clients read the same words.
 */
export const callToolDefinition = {
  name: CALL_TOOL,
  description:
    'Runs one tool of a toolset that is active in the session, with its arguments. Activate toolsets with ' +
    'manage_toolsets first; its result lists the tools it made usable and their input schemas.',
  parameters: {
    type: 'object',
    properties: {
      name: { type: 'string', description: 'The tool to run, as named in manage_toolsets results.' },
      arguments: { type: 'object', description: 'The tool’s arguments, matching its input schema.' },
    },
    required: ['name'],
    additionalProperties: false,
  },
} as const;

/** A meta-tool call as the agent forwards it: the model's arguments, unparsed, so the gateway judges (and audits) them. */
export const ManageToolsetsRequest = z.object({
  session_id: SessionId,
  arguments: z.record(z.string(), z.unknown()),
});

/** What the meta-tool did: `result` is what the model reads; `change` is set when toolsets changed. */
export const ManageToolsetsResponse = z.object({
  result: z.record(z.string(), z.unknown()),
  change: z
    .object({
      action: z.enum(['ACTIVATE', 'DEACTIVATE']),
      toolset_ids: z.array(z.string()),
      active_toolsets: z.array(z.string()),
      added_tools: z.array(z.string()),
      removed_tools: z.array(z.string()),
    })
    .optional(),
  /** After a change: the session's tools now, so the caller needs no second request for its new tool list. */
  tools: z.array(GatewayTool).optional(),
});
export type ManageToolsetsResponse = z.infer<typeof ManageToolsetsResponse>;

// A missing list or hash says how to get one: the hash is what binds the approval to what was reviewed.
const HOW_TO_APPROVE =
  'name each withheld tool as {name, hash} with the hash GET /mcp/admin/toolsets shows for it ' +
  '(toolsets[].withheld[].hash); `toolshift toolsets approve <id>` shows the diff and sends them';
/**
 * What an operator reviewed: each withheld tool by name with the `hash` the listing showed for it. A definition
 * that changed since (another hash now) is not released: an approval binds to what was shown.
 */
export const ApproveToolsetRequest = z.strictObject({
  // boundedList's shape (length checked before the items), with a missing list saying how to get one.
  tools: z
    .array(z.unknown(), {
      error: (iss) => (iss.input === undefined ? `required: ${HOW_TO_APPROVE}` : undefined),
    })
    .max(LIMITS.ids, {
      error: (iss) => `at most ${LIMITS.ids} items (got ${(iss.input as unknown[]).length})`,
    })
    .pipe(
      z.array(
        z.strictObject(
          {
            name: boundedString(LIMITS.id),
            hash: z
              .string({ error: `required: ${HOW_TO_APPROVE}` })
              .regex(/^[0-9a-f]{64}$/, 'must be the 64-hex-digit hash the listing shows (withheld[].hash)'),
          },
          { error: (iss) => (iss.code === 'invalid_type' ? HOW_TO_APPROVE : undefined) },
        ),
      ),
    )
    .refine((tools) => tools.length > 0, `name at least one tool: ${HOW_TO_APPROVE}`),
});

export const ApproveToolsetResponse = z.object({
  toolset_id: z.string(),
  approved: z.array(z.string()),
  /** Named tools whose definition changed since they were shown: still withheld, to be reviewed again. */
  changed_since_shown: z.array(z.object({ name: z.string(), hash: z.string() })),
  toolset: ToolsetInfo.optional(),
});

export const ReloadResponse = z.object({
  added: z.array(z.string()),
  removed: z.array(z.string()),
  changed: z.array(z.string()),
  unchanged: z.array(z.string()),
  warnings: z.array(z.string()),
});

/** A playbook prompt as listed: its arguments say which are required. */
export const PromptInfo = z.object({
  name: z.string(),
  description: z.string(),
  arguments: z.array(z.object({ name: z.string(), description: z.string(), required: z.boolean() })),
});

export const RenderPromptRequest = z.strictObject({
  arguments: boundedRecord(boundedString(LIMITS.promptArgValue), LIMITS.promptArgs).default({}),
});
export type RenderPromptRequest = z.infer<typeof RenderPromptRequest>;

export const RenderedPrompt = z.object({ name: z.string(), description: z.string(), text: z.string() });
export type RenderedPrompt = z.infer<typeof RenderedPrompt>;

export const PolicyInfo = z.object({
  file: z.string().nullable(),
  default: z.enum(['allow', 'ask', 'deny']),
  rules: z.array(z.record(z.string(), z.unknown())),
});

export const Approval = z.object({
  id: z.string(),
  session_id: z.string(),
  task_id: z.string().nullable(),
  kind: z.enum(['call', 'activate']),
  subject: z.string(),
  arguments: z.record(z.string(), z.unknown()).nullable(),
  reason: z.string(),
  status: z.enum(['pending', 'approved', 'denied', 'expired', 'used']),
  created_at: z.string(),
  expires_at: z.string(),
  decided_by: z.string().nullable(),
  decision_reason: z.string().nullable(),
});
export type Approval = z.infer<typeof Approval>;

export const DecideApprovalRequest = z.strictObject({
  approve: z.boolean(),
  reason: boundedString(LIMITS.reason).optional(),
});

export const AuditRow = z.object({
  id: z.number(),
  at: z.string(),
  session_id: z.string().nullable(),
  task_id: z.string().nullable(),
  actor: z.string(),
  kind: z.string(),
  subject: z.string(),
  ok: z.boolean(),
  detail: z.string().nullable(),
});

/** The most audit rows one page holds; with each row's texts capped (AUDIT_TEXT_MAX), a page stays a few MiB. */
export const AUDIT_PAGE_MAX = 1000;

/** A page of the audit trail; `next_cursor` (null on the last page) fetches the next, older one. */
export const AuditPage = z.object({ audit: z.array(AuditRow), next_cursor: z.string().nullable() });

/** The routes, used both to validate requests and to generate /openapi.json. */
export const gatewayRoutes = {
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
    roles: ['admin', 'approver'],
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
    roles: ['admin', 'approver', 'agent'],
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
    roles: ['admin'],
    summary:
      'The audit trail, newest first, a page at a time (pass next_cursor as cursor): toolset changes, refused ' +
      'and approved calls, operator changes',
    query: z.object({
      session_id: SessionId.optional(),
      task_id: boundedString(LIMITS.sessionId).optional(),
      since: boundedString(LIMITS.cursor)
        .pipe(z.string().datetime({ offset: true }))
        .optional(),
      /** The `next_cursor` of the previous page: rows older than it (keyset paging, fast on any table size). */
      cursor: boundedString(LIMITS.cursor)
        .pipe(z.string().regex(/^[1-9][0-9]{0,15}$/, 'must be the next_cursor of an earlier page'))
        .optional(),
      limit: pageLimit(AUDIT_PAGE_MAX, 100),
    }),
    responses: { 200: AuditPage },
  },
  listPrompts: {
    method: 'get',
    path: '/mcp/prompts',
    roles: ['admin', 'agent', 'mcp'],
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
      'Re-read TOOLSETS_DIR and USER_TOOLSETS_DIR: load what is new (servers start on first use), drop what is gone, skip a toolset whose names collide; an invalid shipped directory changes nothing',
    responses: { 200: ReloadResponse, 400: ErrorBody, 401: ErrorBody },
  },
  listToolsets: {
    method: 'get',
    path: '/mcp/admin/toolsets',
    roles: ['admin', 'agent'],
    summary: 'The toolset catalog with each toolset’s state in a session',
    query: ListToolsetsQuery,
    responses: { 200: ListToolsetsResponse, 400: ErrorBody, 401: ErrorBody },
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
    responses: { 200: ToolResult, 400: ErrorBody, 403: ErrorBody, 404: ErrorBody, 502: ErrorBody },
  },
  health: {
    method: 'get',
    path: '/health',
    summary: 'Liveness and backend health',
    responses: { 200: Health, 503: ErrorBody },
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
