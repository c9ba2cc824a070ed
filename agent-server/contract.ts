import { z } from 'zod';
import { SessionId } from '../mcp-gateway/contract.ts';
import { ErrorBody } from '../tool-server/contract.ts';

// The agent-server's HTTP API. The seed's `{goal}` → `{status, final_answer}` works unchanged.

export const ExecuteTaskRequest = z.object({
  goal: z.string().trim().min(1, 'must not be empty').max(100_000),
  session_id: SessionId.optional(),
  max_steps: z.number().int().min(1).max(500).optional(),
});
export type ExecuteTaskRequest = z.infer<typeof ExecuteTaskRequest>;

export const Usage = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
});
export type Usage = z.infer<typeof Usage>;

export const TaskStatus = z.enum(['running', 'completed', 'failed', 'max_steps']);
export type TaskStatus = z.infer<typeof TaskStatus>;

export const ExecuteTaskResponse = z.object({
  status: z.enum(['completed', 'failed', 'max_steps']),
  final_answer: z.string().nullable(),
  task_id: z.string(),
  session_id: z.string(),
  /** Model calls the task took. */
  steps: z.number(),
  usage: Usage,
  /** Toolsets the task activated, in order. */
  toolsets_used: z.array(z.string()),
  error: z.string().optional(),
});
export type ExecuteTaskResponse = z.infer<typeof ExecuteTaskResponse>;

export const EventType = z.enum([
  'task_started',
  'model_call',
  'tool_call',
  'toolset_change',
  'task_finished',
]);

/** One recorded step of a task; also what the SSE stream sends (event name = `type`). */
export const TaskEvent = z.object({
  seq: z.number(),
  type: EventType,
  at: z.string(),
  duration_ms: z.number().nullable(),
  data: z.record(z.string(), z.unknown()),
});
export type TaskEvent = z.infer<typeof TaskEvent>;

export const Task = z.object({
  task_id: z.string(),
  session_id: z.string(),
  goal: z.string(),
  status: TaskStatus,
  final_answer: z.string().nullable(),
  error: z.string().nullable(),
  steps: z.number(),
  usage: Usage,
  toolsets_used: z.array(z.string()),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});
export type Task = z.infer<typeof Task>;

export const TaskDetail = Task.extend({ events: z.array(TaskEvent) });

/** The routes, used both to validate requests and to generate /openapi.json. */
export const agentRoutes = {
  executeTask: {
    method: 'post',
    path: '/agent/execute_task',
    summary: 'Run a task to its end; with Accept: text/event-stream, stream its events and then the result',
    body: ExecuteTaskRequest,
    responses: { 200: ExecuteTaskResponse, 400: ErrorBody, 503: ErrorBody },
  },
  getTask: {
    method: 'get',
    path: '/agent/tasks/{id}',
    summary: 'A task with its recorded events',
    params: z.object({ id: z.string().min(1) }),
    responses: { 200: TaskDetail, 404: ErrorBody },
  },
  listTasks: {
    method: 'get',
    path: '/agent/tasks',
    summary: 'Recent tasks, newest first',
    query: z.object({ limit: z.coerce.number().int().min(1).max(500).default(20) }),
    responses: { 200: z.object({ tasks: z.array(Task) }) },
  },
  health: {
    method: 'get',
    path: '/health',
    summary: 'Liveness, and whether a model is configured',
    responses: { 200: z.looseObject({ status: z.literal('ok'), model_configured: z.boolean() }) },
  },
} as const;
