import { z } from 'zod';
import { boundedList, boundedString, LIMITS } from '../../lib/http/limits.ts';
import { ToolAnnotations } from '../../tool-server/contract.ts';
import { SessionId } from './base.ts';

// The gateway's contract, part two: toolsets, their tools, manage_toolsets and call_tool. contract.ts re-exports it.

export const ToolsetAction = z.enum(['ACTIVATE', 'DEACTIVATE', 'ENABLE', 'DISABLE']);

export const ChangeToolsetsRequest = z.strictObject({
  action: ToolsetAction,
  toolset_ids: boundedList(boundedString(LIMITS.id), LIMITS.ids).refine((ids) => ids.length > 0, {
    message: 'give at least one toolset id',
  }),
  session_id: SessionId.optional(),
  /** ACTIVATE only: just these tools of the toolsets (each a tool of one of them); absent: all their tools. */
  tools: boundedList(boundedString(LIMITS.id), LIMITS.ids)
    .refine((t) => t.length > 0, 'name at least one tool, or leave tools out to activate all of them')
    .optional(),
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
  /** Active with only some of its tools (ACTIVATE with `tools`): those. */
  active_tools: z.array(z.string()).optional(),
  /**
   * With a query, on the first toolset only: it leads the rest by a wide margin (the ranking's certainty) and the
   * operator's policy lets it be activated without a human, so an agent may activate it before its model asks.
   */
  certain: z.boolean().optional(),
  /** What this toolset's tool definitions cost a model request, in tokens (TOKENIZER); absent until listed. */
  definition_tokens: z.number().optional(),
});
export type ToolsetInfo = z.infer<typeof ToolsetInfo>;

export const ListToolsetsQuery = z.object({
  session_id: SessionId.optional(),
  /** A plain-language need; toolsets come back ranked (ids, descriptions, tool names and descriptions). */
  query: boundedString(LIMITS.query).optional(),
});

export const ListToolsetsResponse = z.object({
  session_id: z.string(),
  toolsets: z.array(ToolsetInfo),
  /** AUTO_ACTIVATE is on: calling a tool of an inactive toolset activates it when that needs no human. */
  auto_activate: z.boolean().optional(),
});
export type ListToolsetsResponse = z.infer<typeof ListToolsetsResponse>;

/** A tool as the gateway offers it: the backend's definition plus the toolset that brought it. */
export const GatewayTool = z.object({
  name: z.string(),
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()),
  /** Native tools declare all hints; an upstream MCP tool's annotations are passed on as the server gave them. */
  annotations: ToolAnnotations.partial().loose(),
  /**
   * The JSON Schema of a successful call's `result`: every native tool's, an upstream MCP tool's when it declares
   * one (its `structuredContent`, which the call returns then). Not part of what a model's tool list sends.
   */
  output_schema: z.record(z.string(), z.unknown()).optional(),
  toolset: z.string(),
});
export type GatewayTool = z.infer<typeof GatewayTool>;

export const ListToolsQuery = z.object({ session_id: SessionId.optional() });
export const ListToolsResponse = z.object({ session_id: z.string(), tools: z.array(GatewayTool) });

/** A call's idempotency key: the agent's is `<task>:<step>:<index>:<call id>` (docs/task-loop.md). */
export const IdempotencyKey = z
  .string()
  .regex(/^[\x21-\x7e]{1,512}$/, 'must be 1-512 printable ASCII characters without spaces');

/** The lease a call is sent under: the task and its fencing number (the agent's store numbers each claim). */
export const CallFence = z.object({
  task_id: SessionId,
  fence: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
});
export type CallFence = z.infer<typeof CallFence>;

export const CallToolRequest = z.object({
  session_id: SessionId.optional(),
  // A tool's own business: bounded by the body cap (MAX_BODY_BYTES) and the JSON depth limit, not here.
  arguments: z.record(z.string(), z.unknown()).default({}),
  /**
   * Runs the call at most once per key: a repeat gets the recorded outcome, or `in_progress` while the first
   * is still running (the key is bound to its session and tool: another use of it is a `conflict`).
   */
  idempotency_key: IdempotencyKey.optional(),
  /** Refused (`fenced`, nothing runs) when the task's highest fence the gateway has seen is higher. */
  fence: CallFence.optional(),
});

/** A worker that took a task over says so before deciding what to run again: lower fences are refused from then. */
export const AnnounceFenceRequest = z.object({ fence: CallFence.shape.fence });
export const AnnounceFenceResponse = z.object({ task_id: z.string(), fence: z.number() });

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
      tools: {
        type: 'array',
        items: { type: 'string' },
        description:
          "ACTIVATE only: just these tools of the toolsets (e.g. LIST's matched_tools), not all of them.",
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
