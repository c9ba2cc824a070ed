import { z } from 'zod';
import { PendingApproval, TokenTotals, ToolExposure, Usage } from './base.ts';

// The agent-server's contract, part two: a task's events, a union on `type`, each kind with its own data.
// contract.ts re-exports it.

export const EventType = z.enum([
  'task_started',
  'model_request',
  'model_retry',
  'model_delta',
  'model_call',
  'tool_call_started',
  'tool_call',
  'toolset_change',
  'approval_needed',
  'approval_decided',
  'consent_required',
  'task_resumed',
  'context_compacted',
  'limit_wait',
  'task_finished',
]);
export type EventType = z.infer<typeof EventType>;

/** What a change of toolsets did to the session's tool-definition tokens, as the gateway counted them. */
export const ToolDefinitionTokens = z.looseObject({
  change: z.number(),
  total: z.number(),
  budget: z.number().optional(),
});

/** What each kind of event carries (`data`): the contract the CLI, the console and other clients read. */
const StepNo = z.number().int();
const ToolNames = z.array(z.string());
const EventData = {
  task_started: z.looseObject({
    task_id: z.string(),
    session_id: z.string(),
    /** Absent on events recorded before threads. */
    thread_id: z.string().nullable().optional(),
    goal: z.string(),
    max_steps: z.number(),
    max_duration_s: z.number(),
    exposure: ToolExposure,
    model: z.string().nullable(),
    request_id: z.string().nullable(),
  }),
  /** A request about to go to the model: what it carries and what every enabled toolset would have cost. */
  model_request: z.looseObject({
    step: StepNo,
    tools: ToolNames,
    tool_tokens: z.number(),
    message_tokens: z.number(),
    messages: z.number(),
    all_toolsets_tool_tokens: z.number(),
    all_toolsets_not_counted: ToolNames.optional(),
    tokenizer: z.string(),
    exposure: ToolExposure,
  }),
  /** A model call failed and is tried again after `delay_ms` (`status` null: no answer). */
  model_retry: z.looseObject({
    step: StepNo,
    attempt: z.number(),
    status: z.number().nullable(),
    reason: z.string(),
    delay_ms: z.number(),
  }),
  /**
   * The model's reply text as it streams (AGENT_MODEL_STREAM), a piece every 50 ms or so; never stored. A
   * piece of a later `attempt` than the text shown so far replaces it (the earlier attempt failed).
   */
  model_delta: z.looseObject({ step: StepNo, attempt: z.number().int(), text: z.string() }),
  model_call: z.looseObject({
    step: StepNo,
    tools: ToolNames,
    content: z.string().nullable(),
    tool_calls: z.array(z.object({ id: z.string(), name: z.string() })),
    usage: Usage,
    /** The endpoint sent no usage for this reply (some do not when streaming): `usage` is zeros, not a count. */
    usage_missing: z.literal(true).optional(),
    finish_reason: z.string().nullable(),
    latency_ms: z.number(),
    attempts: z.number(),
    tool_tokens: z.number(),
    message_tokens: z.number(),
  }),
  /**
   * `in_script`: a call a run_code script made, naming the run_code call (its id is that call's, `#` its number);
   * `script`: a run_code call's script (its first 8,000 characters).
   */
  tool_call_started: z.looseObject({
    step: StepNo,
    tool_call_id: z.string(),
    name: z.string(),
    in_script: z.string().optional(),
    script: z.string().optional(),
  }),
  /** A tool call's outcome (`output` cut to 2,000 characters; the model got all of it). */
  tool_call: z.looseObject({
    step: StepNo,
    tool_call_id: z.string(),
    name: z.string(),
    toolset: z.string().nullable(),
    arguments: z.unknown(),
    ok: z.boolean(),
    result_bytes: z.number(),
    output: z.string(),
    in_script: z.string().optional(),
  }),
  /**
   * manage_toolsets changed the session's toolsets (and what that did to the tool-definition tokens); `primed`:
   * before the first model call, for the goal; `all_loaded`: before it, every toolset of a small catalog (exposure
   * auto); `automatic`: for a call of a tool of an inactive toolset (the
   * call's own `tool_call` follows, with the same id).
   */
  toolset_change: z.looseObject({
    step: StepNo,
    tool_call_id: z.string(),
    action: z.enum(['ACTIVATE', 'DEACTIVATE']),
    toolset_ids: ToolNames,
    active_toolsets: ToolNames,
    added_tools: ToolNames,
    removed_tools: ToolNames,
    tool_definition_tokens: ToolDefinitionTokens.optional(),
    primed: z.literal(true).optional(),
    all_loaded: z.literal(true).optional(),
    automatic: z.literal(true).optional(),
  }),
  approval_needed: PendingApproval.loose(),
  approval_decided: z.looseObject({
    call_id: z.string(),
    approval_id: z.string(),
    approved: z.boolean(),
    /** What the model is told (a denial's reason, an expiry). */
    message: z.string().optional(),
    /** Who decided (the role of the credential, as the gateway names it: `admin`, `user (AGENT_API_TOKEN)`); null: nobody did (expired). Absent on events recorded before it was kept. */
    decided_by: z.string().nullable().optional(),
    decided_at: z.string().nullable().optional(),
    /** The reason the human gave, if any. */
    reason: z.string().nullable().optional(),
  }),
  /**
   * The task goes on under another claim (its worker stopped, or its lease lapsed): from its checkpointed
   * reply of `step`, the first `calls_done` calls answered as recorded; `unknown` names a call that started
   * and never ended (run again when the tool says it is read-only or idempotent: `rerun`; else a human decides).
   */
  task_resumed: z.looseObject({
    worker: z.string(),
    step: StepNo.nullable(),
    calls_done: z.number(),
    unknown: z.string().nullable(),
    rerun: z.boolean(),
  }),
  /**
   * The conversation neared the model's context budget before the request of `step`: `stubbed` more tool results
   * were moved out of the model's view (read back by handle), and the first `summarised_messages` messages after
   * the system prompt stand summarised; the view's tokens before and after (tools included).
   */
  context_compacted: z.looseObject({
    step: StepNo,
    stubbed: z.number(),
    summarised_messages: z.number(),
    tokens_before: z.number(),
    tokens_after: z.number(),
    /** Why the summary's model call failed: the stubs stand, and the next request tries again. */
    summary_failed: z.string().optional(),
  }),
  /**
   * A call (or activation) refused until the task's owner connects their own account for `toolset`: the task
   * waits (`awaiting_consent`) and makes the call again once they have.
   */
  consent_required: z.looseObject({
    step: StepNo,
    tool_call_id: z.string().optional(),
    toolset: z.string(),
    connect_url: z.string().nullable(),
  }),
  /** A tool call past its owner's limit (tool_calls_per_minute) waits for the limit's next window. */
  limit_wait: z.looseObject({
    step: StepNo,
    tool_call_id: z.string(),
    limit: z.string(),
    subject: z.string(),
    seconds: z.number(),
  }),
  task_finished: z.looseObject({
    status: z.string(),
    error: z.string().nullable(),
    steps: z.number(),
    usage: Usage,
    tokens: TokenTotals,
    toolsets_used: ToolNames,
  }),
} satisfies Record<EventType, z.ZodType>;
export type EventData = { [T in EventType]: z.infer<(typeof EventData)[T]> };

const eventOf = <T extends EventType>(type: T) =>
  z.object({
    seq: z.number(),
    type: z.literal(type),
    at: z.string(),
    duration_ms: z.number().nullable(),
    data: EventData[type],
  });

/**
 * The model's text as it streams, sent live to a task's followers and never stored: no seq (nor SSE id), so a
 * stream resumed with Last-Event-ID does not send it again.
 */
export const ModelDeltaEvent = z.object({
  type: z.literal('model_delta'),
  at: z.string(),
  data: EventData.model_delta,
});
export type ModelDeltaEvent = z.infer<typeof ModelDeltaEvent>;

/** One recorded step of a task; also what the SSE stream sends (event name = `type`): a union on `type`. */
export const TaskEvent = z.discriminatedUnion('type', [
  eventOf('task_started'),
  eventOf('model_request'),
  eventOf('model_retry'),
  eventOf('model_call'),
  eventOf('tool_call_started'),
  eventOf('tool_call'),
  eventOf('toolset_change'),
  eventOf('approval_needed'),
  eventOf('approval_decided'),
  eventOf('consent_required'),
  eventOf('task_resumed'),
  eventOf('context_compacted'),
  eventOf('limit_wait'),
  eventOf('task_finished'),
]);
export type TaskEvent = z.infer<typeof TaskEvent>;
