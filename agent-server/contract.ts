import { z } from 'zod';
import { DatabaseHealth, ErrorBody, type EventStream } from '../lib/http/contract.ts';
import { boundedRecord, boundedString, LIMITS, pageLimit } from '../lib/http/limits.ts';
import { OwnSessionId } from '../mcp-gateway/contract.ts';
import {
  FinalStatus,
  PendingApproval,
  TaskStatus,
  TokenTotals,
  ToolExposure,
  Usage,
  Webhook,
  WebhookDelivery,
} from './contract/base.ts';
import { EventType, ModelDeltaEvent, TaskEvent } from './contract/events.ts';
import { IfBusy, ThreadId, threadRoutes } from './contract/threads.ts';

export * from './contract/base.ts';
export * from './contract/events.ts';
export * from './contract/threads.ts';

// The agent-server's HTTP API. The seed's `{goal}` → `{status, final_answer}` works unchanged.

const executeTaskFields = {
  goal: boundedString(LIMITS.goal).trim().min(1, 'must not be empty').optional(),
  /** A playbook (GET /mcp/prompts at the gateway) whose rendering is the goal; give this or `goal`. */
  prompt: z
    .strictObject({
      name: boundedString(LIMITS.id).min(1),
      arguments: boundedRecord(boundedString(LIMITS.promptArgValue), LIMITS.promptArgs).default({}),
    })
    .optional(),
  /** The gateway session the task acts in; never one of the MCP face's (a handle, a view). */
  session_id: OwnSessionId.optional(),
  /** The thread the task continues (its earlier turns and its session); a new thread when absent. */
  thread_id: ThreadId.optional(),
  /** When the thread's last task has not ended: wait for it (default), refuse (409), or cancel it. */
  if_busy: IfBusy.optional(),
  max_steps: z.number().int().min(1).max(500).optional(),
  /** Wall-clock limit of the task; it ends `timed_out` when reached (default AGENT_MAX_DURATION_S). */
  max_duration_s: z.number().int().min(1).max(604_800).optional(),
  /** false: answer 202 at once with the task id (like `Prefer: respond-async`); follow it at /events. */
  wait: z.boolean().optional(),
  /** How the model sees tools in this task (default TOOL_EXPOSURE): `native` or cache-preserving `dispatch`. */
  exposure: ToolExposure.optional(),
  /**
   * Activate the toolset discovery is certain of for the goal before the first model call (default
   * AGENT_PRIME_TOOLSETS, on); the model sees it and may deactivate it.
   */
  prime: z.boolean().optional(),
  /** `{url}`: POSTed, signed (Standard Webhooks), when the task ends or waits for a human (README "Webhooks"). */
  webhook: Webhook.optional(),
};

/** A field name execute_task does not take is refused, naming it and the fields it does take. */
const EXECUTE_TASK_FIELDS = Object.keys(executeTaskFields);

export const ExecuteTaskRequest = z
  .strictObject(executeTaskFields, {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}; ` +
          `execute_task takes ${EXECUTE_TASK_FIELDS.join(', ')}`
        : undefined,
  })
  .refine((r) => (r.goal === undefined) !== (r.prompt === undefined), {
    message: 'give exactly one of goal (the task in words) and prompt ({name, arguments} of a playbook)',
    path: ['goal'],
  });
export type ExecuteTaskRequest = z.infer<typeof ExecuteTaskRequest>;

export const ExecuteTaskResponse = z.object({
  status: FinalStatus,
  final_answer: z.string().nullable(),
  task_id: z.string(),
  session_id: z.string(),
  thread_id: z.string().nullable(),
  /** Model calls the task took. */
  steps: z.number(),
  usage: Usage,
  /** Toolsets the task activated, in order. */
  toolsets_used: z.array(z.string()),
  tokens: TokenTotals.optional(),
  /** Wall-clock time of the task. */
  duration_ms: z.number().optional(),
  error: z.string().optional(),
});
export type ExecuteTaskResponse = z.infer<typeof ExecuteTaskResponse>;

/**
 * A task submitted with `Prefer: respond-async` or `wait: false`: it runs on (or, with MAX_CONCURRENT_TASKS
 * running, waits in the queue and starts when a slot frees); follow it at /events.
 */
export const TaskAccepted = z.object({
  task_id: z.string(),
  session_id: z.string(),
  thread_id: z.string(),
  status: z.enum(['running', 'queued']),
});

export const Task = z.object({
  task_id: z.string(),
  session_id: z.string(),
  /** The thread the task is a turn of (null: recorded before threads). */
  thread_id: z.string().nullable(),
  goal: z.string(),
  status: TaskStatus,
  final_answer: z.string().nullable(),
  error: z.string().nullable(),
  steps: z.number(),
  usage: Usage,
  toolsets_used: z.array(z.string()),
  tokens: TokenTotals.nullable(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});
export type Task = z.infer<typeof Task>;

export const TaskDetail = Task.extend({
  events: z.array(TaskEvent),
  /** The POSTs of its webhook, oldest first (absent: none recorded: it names no webhook, or has not ended or waited). */
  webhooks: z.array(WebhookDelivery).optional(),
});

/**
 * A decision. For a call whose outcome is unknown (kind `unknown_outcome`): `approve` runs it again, a denial
 * skips it (the model is told it may have run), and `fail: true` (with `approve: false`) ends the task failed.
 */
export const DecideApproval = z.strictObject({
  approve: z.boolean(),
  reason: boundedString(LIMITS.reason).optional(),
  fail: z.boolean().optional(),
});

/** The model endpoint's last known state (agent-server/clients/model.ts ModelHealth). */
export const ModelHealth = z.object({
  url: z.string(),
  /** The provider spoken to it (AGENT_PROVIDER). */
  provider: z.string().optional(),
  /** `unknown` before the first call; `unreachable`: no answer (refused, timed out, TLS); `error`: an error status. */
  state: z.enum(['unknown', 'ok', 'unreachable', 'error']),
  status: z.number().optional(),
  error: z.string().optional(),
  at: z.string().optional(),
});

/** /health: `{status}` to anyone; the rest only to a caller with a token. */
export const Health = z.looseObject({
  status: z.enum(['ok', 'degraded']),
  model_configured: z.boolean().optional(),
  model: ModelHealth.optional(),
  /** PostgreSQL (DATABASE_URL), when it is used. */
  database: DatabaseHealth.optional(),
});

/** Each event's schema by its type: the recorded ones, and the model's streamed text (never recorded). */
const eventSchemas = new Map<EventType, z.ZodType>([
  ...TaskEvent.options.map((o) => [o.shape.type.value, o] as const),
  ['model_delta', ModelDeltaEvent],
]);

/** A task's events as Server-Sent Events (event name = the event's `type`), then one `result`. */
export const TaskEventStream: EventStream = {
  description:
    'The task’s events as they are recorded (each event’s `data` is the whole event), then one `result` event ' +
    'with the task’s outcome, after which the stream ends. While the model writes its reply (streaming on), ' +
    '`model_delta` events carry its text as it comes, to the followers of a task running in the agent-server ' +
    'followed; they are not recorded, so they have no seq and no id.',
  idDescription:
    'The event’s seq: send it back as Last-Event-ID (or ?after=) to resume after it (a `model_delta` has none)',
  events: {
    ...Object.fromEntries(EventType.options.map((type) => [type, eventSchemas.get(type) as z.ZodType])),
    result: ExecuteTaskResponse,
  },
};

/** A task id in a path (`task_` and a UUID: 41 characters). */
const TaskIdParam = boundedString(LIMITS.id).min(1);

/** The routes, used both to validate requests and to generate /openapi.json. */
export const agentRoutes = {
  listApprovals: {
    method: 'get',
    path: '/agent/approvals',
    summary: 'Tool calls and activations of tasks that wait for a human yes',
    responses: { 200: z.object({ approvals: z.array(PendingApproval) }) },
  },
  decideApproval: {
    method: 'post',
    path: '/agent/tasks/{id}/approvals/{call_id}',
    summary:
      'Approve or deny what a task waits for; the task resumes (also after a restart of the agent-server)',
    roles: ['user'],
    params: z.object({ id: TaskIdParam, call_id: boundedString(LIMITS.callId).min(1) }),
    body: DecideApproval,
    responses: {
      200: z.object({
        task_id: z.string(),
        call_id: z.string(),
        status: z.string(),
        /** Who decided (the role of the credential, as the gateway names it) and when; the reason given. */
        decided_by: z.string().nullable(),
        decided_at: z.string().nullable(),
        reason: z.string().nullable(),
      }),
      403: ErrorBody,
      404: ErrorBody,
      409: ErrorBody,
      502: ErrorBody,
      504: ErrorBody,
    },
  },
  executeTask: {
    method: 'post',
    path: '/agent/execute_task',
    roles: ['user'],
    summary:
      'Run a task to its end; with Accept: text/event-stream, stream its events and then the result; with ' +
      'Prefer: respond-async or {"wait": false}, answer 202 at once',
    body: ExecuteTaskRequest,
    stream: TaskEventStream,
    responses: {
      200: ExecuteTaskResponse,
      202: TaskAccepted,
      400: ErrorBody,
      404: ErrorBody,
      409: ErrorBody,
      503: ErrorBody,
    },
  },
  taskEvents: {
    method: 'get',
    path: '/agent/tasks/{id}/events',
    summary:
      'The task’s events as SSE: replayed from the start (or after Last-Event-ID / ?after=), followed live ' +
      'while it runs, then a `result` event; comments keep an idle stream alive',
    params: z.object({ id: TaskIdParam }),
    query: z.object({ after: z.coerce.number().int().min(0).optional() }),
    produces: 'text/event-stream',
    stream: TaskEventStream,
    responses: { 200: z.string(), 404: ErrorBody },
  },
  cancelTask: {
    method: 'post',
    path: '/agent/tasks/{id}/cancel',
    roles: ['user'],
    summary:
      'Cancel a running task: it stops between steps and any model or tool call in flight is abandoned; ' +
      'answers once it has stopped',
    params: z.object({ id: TaskIdParam }),
    responses: { 200: Task, 404: ErrorBody, 409: ErrorBody },
  },
  getTask: {
    method: 'get',
    path: '/agent/tasks/{id}',
    summary: 'A task with its recorded events',
    params: z.object({ id: TaskIdParam }),
    responses: { 200: TaskDetail, 404: ErrorBody },
  },
  listTasks: {
    method: 'get',
    path: '/agent/tasks',
    summary: 'Recent tasks, newest first',
    query: z.object({ limit: pageLimit(500, 20) }),
    responses: { 200: z.object({ tasks: z.array(Task) }) },
  },
  health: {
    method: 'get',
    path: '/health',
    summary:
      'Liveness; with a token, whether a model is configured and its endpoint’s last known state, and the ' +
      'database’s (status `degraded` while that endpoint is unreachable or answers errors, or PostgreSQL is ' +
      'unreachable)',
    responses: { 200: Health },
  },
  ...threadRoutes,
  metrics: {
    method: 'get',
    path: '/metrics',
    summary:
      'Prometheus metrics (text exposition format); needs AGENT_API_TOKEN when it is set, like every route',
    produces: 'text/plain',
    responses: { 200: z.string() },
  },
} as const;
