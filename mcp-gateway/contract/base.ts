import { z } from 'zod';
import { ErrorBody } from '../../tool-server/contract.ts';

// The gateway's contract, part one: ids, the task header and the refusal codes. contract.ts re-exports it.

export const SessionId = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'must be 1-128 characters of letters, digits, _ . : -');

/**
 * The MCP face's own session ids: its handles and its legacy connections' sessions (`mcp_…`, each bound to the
 * credential that made it) and its fixed views (`view:…`). No other door acts in them: the gateway's REST routes
 * take a handle only from the credential that made it and a view never, and a task names none.
 */
export const FACE_SESSION_PREFIXES = { handle: 'mcp_', view: 'view:' } as const;

/** Whether `id` is in the MCP face's namespace (FACE_SESSION_PREFIXES). */
export const isFaceSessionId = (id: string): boolean =>
  id.startsWith(FACE_SESSION_PREFIXES.handle) || id.startsWith(FACE_SESSION_PREFIXES.view);

/** What a session id outside the MCP face may be, for error messages. */
export const OWN_SESSION_RULE =
  `a session of your own: 1-128 letters, digits, _ . : -, not starting with ${FACE_SESSION_PREFIXES.handle} ` +
  `or ${FACE_SESSION_PREFIXES.view} (those are the MCP face's sessions, each bound to the MCP client that made it)`;

/** A session id a caller outside the MCP face names: none of the face's (a task's, a REST client's). */
export const OwnSessionId = SessionId.refine((id) => !isFaceSessionId(id), {
  message: `must be ${OWN_SESSION_RULE}; or leave it out for a new one`,
});

export const ToolsetId = z.string().regex(/^[a-z0-9_]{1,64}$/, 'must match ^[a-z0-9_]{1,64}$');

/** ACTIVATE/DEACTIVATE act on one session; ENABLE/DISABLE set the operator's global ceiling. */
/** The header naming the task a request acts for (agent-server to gateway), so the audit says "model in task X". */
export const TASK_HEADER = 'x-toolshift-task';
/**
 * With TASK_HEADER: `agent` when the agent-server acts for the task by itself (goal priming), not carrying out the
 * model's call, so the audit says "agent for task X (goal priming)" instead of "model in task X"; `run_code`
 * for a call a run_code script made ("model in task X (run_code)"), which a policy's `ask` refuses.
 */
export const BY_AGENT_HEADER = 'x-toolshift-by-agent';
/**
 * With TASK_HEADER: whose task it is (`user:<id>`, the owner of its thread), so the gateway records the task's
 * calls and approvals as that user's work. Taken from the agent's token only.
 */
export const OWNER_HEADER = 'x-toolshift-owner';
/** What OWNER_HEADER holds; any other value is ignored. */
export const OWNER_PATTERN = /^user:[A-Za-z0-9_-]{1,64}$/;

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
  /** The policy asks a human first and the call came from a run_code script, which cannot wait: call it directly. */
  'direct_call_only',
  /**
   * The toolset reaches its server with each person's own account, and this person has not connected theirs:
   * the body carries `toolset` and `connect_url`, where they connect it.
   */
  'consent_required',
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
  /** A call with this idempotency key is still running; ask again with the same key (`retry_after_s`). */
  'in_progress',
  /** The call was sent under a task's lease that has since passed to another worker: it did not run. */
  'fenced',
]);
export type RefusalCode = z.infer<typeof RefusalCode>;

/** A refusal as it travels over HTTP. */
export const RefusalBody = ErrorBody.extend({ code: RefusalCode.optional() });
