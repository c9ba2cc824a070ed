import { z } from 'zod';
import { ErrorBody } from '../../lib/http/contract.ts';
import { boundedString, LIMITS, pageLimit } from '../../lib/http/limits.ts';
import { OwnSessionId } from '../../mcp-gateway/contract.ts';
import { TaskStatus, Webhook } from './base.ts';

// The agent-server's contract, part three: threads, conversations that go on over several tasks. A thread's
// tasks are its turns; each sees the turns before it and the thread's session (its active toolsets).
// contract.ts re-exports it.

/** The most turns a thread holds (each turn reads the conversation so far). */
export const MAX_THREAD_TURNS = 1000;

/** A thread id: `thr_` and a UUID. */
export const ThreadId = z
  .string()
  .max(LIMITS.id, { error: `must be at most ${LIMITS.id} characters` })
  .regex(/^thr_[0-9a-f-]{36}$/, 'must be a thread id as the agent-server gives them (thr_ and a UUID)');

/**
 * What a goal sent to a thread whose task has not ended does: `enqueue` waits for it (the default), `reject`
 * answers 409 naming it, `interrupt` cancels it and goes on from what it had done.
 */
export const IfBusy = z.enum(['enqueue', 'reject', 'interrupt']);
export type IfBusy = z.infer<typeof IfBusy>;

export const Thread = z.object({
  thread_id: z.string(),
  session_id: z.string(),
  /** The goal of its first turn, cut to 200 characters (or the title it was made with). */
  title: z.string(),
  webhook: Webhook.nullable(),
  created_at: z.string(),
  /** When its last turn was submitted. */
  updated_at: z.string(),
});
export type Thread = z.infer<typeof Thread>;

/** One turn of a thread: a task, its goal and how it ended. */
export const ThreadTurn = z.object({
  task_id: z.string(),
  goal: z.string(),
  status: TaskStatus,
  final_answer: z.string().nullable(),
  error: z.string().nullable(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});
export type ThreadTurn = z.infer<typeof ThreadTurn>;

export const ThreadDetail = Thread.extend({
  /** Its last `turns` turns (default 100), oldest first; `turns_total` says how many it has. */
  turns: z.array(ThreadTurn),
  turns_total: z.number(),
  /** How much of the conversation was moved out of the model's context (compaction). */
  compaction: z.object({
    summarised_messages: z.number(),
    stubbed_results: z.number(),
  }),
});

export const CreateThread = z.strictObject({
  title: boundedString(200).trim().min(1, 'must not be empty').optional(),
  /** The gateway session the thread acts in (its toolsets); a new one when absent. */
  session_id: OwnSessionId.optional(),
  webhook: Webhook.optional(),
});

const ThreadParams = z.object({ id: ThreadId });

export const threadRoutes = {
  createThread: {
    method: 'post',
    path: '/agent/threads',
    roles: ['user'],
    summary: 'Start a thread: a conversation whose tasks see the turns before them and share one session',
    body: CreateThread,
    responses: { 201: Thread, 400: ErrorBody },
  },
  listThreads: {
    method: 'get',
    path: '/agent/threads',
    summary: 'Your threads, newest first; `after` (the previous page’s `next`) pages on',
    query: z.object({ limit: pageLimit(200, 20), after: ThreadId.optional() }),
    responses: { 200: z.object({ threads: z.array(Thread), next: z.string().nullable() }) },
  },
  getThread: {
    method: 'get',
    path: '/agent/threads/{id}',
    summary: 'A thread with its last turns (goal, answer, task, status), oldest first',
    params: ThreadParams,
    query: z.object({ turns: pageLimit(MAX_THREAD_TURNS, 100) }),
    responses: { 200: ThreadDetail, 404: ErrorBody },
  },
  deleteThread: {
    method: 'delete',
    path: '/agent/threads/{id}',
    roles: ['user'],
    summary: 'Delete a thread with its turns and their messages (not while one of its tasks has not ended)',
    params: ThreadParams,
    responses: {
      200: z.object({ thread_id: z.string(), deleted_tasks: z.number() }),
      404: ErrorBody,
      409: ErrorBody,
    },
  },
} as const;
