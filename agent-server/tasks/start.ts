import { randomUUID } from 'node:crypto';
import { HttpError } from '../../lib/http/http.ts';
import type { ExecuteTaskRequest } from '../contract.ts';
import { ModelNotConfiguredError, ThreadFull, ThreadGone } from '../errors.ts';
import { checkWebhook } from '../webhooks/guard.ts';
import type { AgentCore } from './agent-core.ts';
import type { TaskListener } from './deps.ts';
import { renderGoal } from './relay.ts';
import type { QueuedRequest } from './run.ts';
import { type Caller, planThread } from './threads.ts';

/**
 * Starts a task and returns once it is recorded; the task runs until it ends, whoever is listening. With
 * MAX_CONCURRENT_TASKS running it is queued (recorded as `queued`, started when a slot frees, also after a
 * restart); with the queue full too, refused with 503 and `retry-after`.
 */
export async function startTask(
  a: AgentCore,
  req: ExecuteTaskRequest,
  listener: TaskListener | undefined,
  from: StartOptions,
) {
  const { deps, queue, slots } = a;
  const { maxConcurrent, maxQueued } = a.limits;
  if (!deps.model) throw new ModelNotConfiguredError();
  const waiting = () => queue.items.length + slots.enqueuing;
  if (a.active() >= maxConcurrent && waiting() >= maxQueued) throw full(a, waiting());
  if (req.webhook) await checkWebhook(deps.webhooks, req.webhook.url);
  const goal = req.prompt ? await renderGoal(deps.gateway, req.prompt) : (req.goal as string);
  const plan = await planThread(deps.store, req, goal, from.caller, from.cancel);
  const taskId = `task_${randomUUID()}`;
  const { sessionId, thread } = plan;
  const request: QueuedRequest = {
    maxSteps: req.max_steps ?? deps.defaultMaxSteps,
    maxDurationS: req.max_duration_s ?? a.limits.defaultMaxDurationS,
    exposure: req.exposure ?? deps.exposure ?? 'native',
    prime: req.prime ?? deps.prime ?? true,
    ...(plan.webhook ? { webhook: plan.webhook } : {}),
  };
  const task = {
    taskId,
    sessionId,
    threadId: thread.id,
    goal,
    createdAt: new Date().toISOString(),
    ...request,
  };
  const started = { task_id: taskId, session_id: sessionId, thread_id: thread.id };
  // Judged again after the awaits above: other requests may have taken the last slots meanwhile. The slot
  // (or the place in the queue) is this request's from here, while the task is recorded. A turn of a thread
  // whose last task has not ended waits for it in the queue (a claim takes a thread's turns in order); the store
  // says so too when another turn was recorded meanwhile.
  const record = (queued: boolean) =>
    deps.store.createTask(taskId, sessionId, goal, { queued, request, thread }).catch((err: unknown) => {
      throw asHttpError(err);
    });
  const enqueue = () => {
    const done = queue.enqueue(task, { listener });
    queue.drain();
    return { ...started, done, status: 'queued' as 'running' | 'queued' };
  };
  if (plan.busy || a.active() >= maxConcurrent || waiting() > 0) {
    if (waiting() >= maxQueued) throw full(a, waiting(), plan.busy);
    slots.enqueuing++;
    try {
      await record(true);
    } finally {
      slots.enqueuing--;
    }
    return enqueue();
  }
  slots.claiming++;
  let status: 'running' | 'queued';
  try {
    status = await record(false);
  } finally {
    slots.claiming--;
  }
  return status === 'queued' ? enqueue() : { ...a.launch(task, { listener }), thread_id: thread.id };
}

/** A thread gone or full, as the API answers it; anything else as it is. */
function asHttpError(err: unknown): unknown {
  if (err instanceof ThreadGone) return new HttpError(404, err.message);
  if (err instanceof ThreadFull) return new HttpError(409, err.message);
  return err;
}

/** 503: as many tasks wait as may (`threadBusy`: this one would wait for its thread's last task). */
function full(a: AgentCore, waiting: number, threadBusy = false): HttpError {
  const { maxConcurrent, maxQueued } = a.limits;
  const message =
    threadBusy && maxQueued === 0
      ? 'The thread has a task that has not ended, and no task may wait for another (MAX_QUEUED_TASKS=0); retry shortly'
      : maxQueued === 0
        ? `${a.active()} tasks are running, the most this agent-server runs at once (MAX_CONCURRENT_TASKS=${maxConcurrent}); retry shortly`
        : `${a.active()} tasks are running (MAX_CONCURRENT_TASKS=${maxConcurrent}) and ${waiting} wait for a slot, ` +
          `the most that may wait (MAX_QUEUED_TASKS=${maxQueued}); retry shortly`;
  return new HttpError(503, message, {}, { 'retry-after': '5' });
}

/** Who starts the task, and how a task of its thread is cancelled (if_busy: interrupt). */
export interface StartOptions {
  caller: Caller;
  cancel: (taskId: string) => Promise<boolean>;
}
