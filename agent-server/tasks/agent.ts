import type { ExecuteTaskRequest, ExecuteTaskResponse, PendingApproval, TaskEvent } from '../contract.ts';
import { TaskStoppedError } from '../errors.ts';
import { checkWebhook } from '../webhooks/guard.ts';
import { type AgentCore, createAgentCore, resumePaused, toRun } from './agent-core.ts';
import { type DecisionBody, decideApproval } from './decisions.ts';
import type { AgentDeps, TaskListener } from './deps.ts';
import { AgentShutdown, resultOf } from './outcome.ts';
import { startTask } from './start.ts';
import type { Caller } from './threads.ts';

// A task's lifecycle as the API sees it: start (at once, or queued: start.ts), approvals (decisions.ts), cancel,
// follow, shutdown and what a previous process left. The worker's tasks, its queue (queue.ts) and how one task
// runs (run.ts) are wired in agent-core.ts.

export { resultOf };

/** A task's lifecycle: record it, run the loop apart from any request, store and publish every event. */
export type Agent = ReturnType<typeof createAgent>;

export function createAgent(deps: AgentDeps) {
  const a = createAgentCore(deps);
  /** A caller with no token to tell it apart (no tokens set, or a test): it owns and sees every thread. */
  const anyone: Caller = { owner: 'local', all: true };
  const from = (caller: Caller) => ({ caller, cancel: (id: string) => cancel(a, id, 10_000) });
  return {
    modelConfigured: deps.model !== undefined,
    /** Starts a task as `caller` (the owner of a thread it makes; a thread it names must be theirs). */
    start: (req: ExecuteTaskRequest, caller: Caller = anyone, listener?: TaskListener) =>
      startTask(a, req, listener, from(caller)),

    /** Runs a task to its end; `onEvent` sees each event as it is recorded. */
    async execute(
      req: ExecuteTaskRequest,
      onEvent?: (event: TaskEvent) => void,
      caller: Caller = anyone,
    ): Promise<ExecuteTaskResponse> {
      return (await startTask(a, req, onEvent ? { event: onEvent } : undefined, from(caller))).done;
    },

    /** Refuses (400, saying why) a webhook URL tasks may not be POSTed to. */
    checkWebhook: (url: string) => checkWebhook(deps.webhooks, url),

    /** Whether this process runs the task, waits here for its decision, or holds it queued. */
    holds: (taskId: string): boolean =>
      a.worker.running.has(taskId) || a.queue.items.some((q) => q.task.taskId === taskId),

    /** What paused tasks wait for. */
    pendingApprovals: async (): Promise<PendingApproval[]> =>
      (await deps.store.awaiting()).flatMap((t) =>
        t.pending && t.task.status === 'awaiting_approval' ? [t.pending as PendingApproval] : [],
      ),
    decideApproval: (
      taskId: string,
      callId: string,
      body: DecisionBody,
      authorization: string | undefined,
      by: string,
    ) => decideApproval(a, taskId, callId, body, authorization, by),
    shutdown: () => shutdown(a),
    resumeAll: () => resumeAll(a),
    follow: (taskId: string, listener: TaskListener) => follow(a, taskId, listener),
    cancel: (taskId: string, waitMs = 10_000) => cancel(a, taskId, waitMs),
  };
}

/** Stops every task here without recording an end: paused ones stay paused for the next process. */
async function shutdown(a: AgentCore): Promise<void> {
  const { queue, worker } = a;
  queue.stop();
  // Queued tasks stay queued in the store for the next start; whoever waits for one is told so.
  for (const q of queue.items.splice(0)) {
    q.settle(
      Promise.resolve({
        status: 'failed' as const,
        final_answer: null,
        task_id: q.task.taskId,
        session_id: q.task.sessionId,
        thread_id: q.task.threadId,
        steps: 0,
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
        toolsets_used: [],
        error:
          'the agent-server stopped before the task started; it stays queued and starts at the next start',
      }),
    );
  }
  const all = [...worker.running.values()];
  for (const t of all) t.controller.abort(new AgentShutdown());
  await Promise.allSettled(all.map((t) => t.done));
}

/**
 * Picks up what a previous process left: paused tasks wait for their decision, then go on; queued ones wait
 * again in their order, with (an embedded store) the tasks it left running, which go on from their
 * checkpoints.
 */
async function resumeAll(a: AgentCore): Promise<number> {
  const { deps, queue } = a;
  const requeued = await deps.store.requeueLapsed(deps.store.embedded);
  if (requeued.length > 0)
    deps.log.warn({ tasks: requeued.length }, 'requeued tasks a stopped process left running');
  const all = await deps.store.awaiting();
  for (const t of all) resumePaused(a, t);
  // Tasks a previous process queued and never started wait again, in their order.
  const waiting = await deps.store.queued();
  for (const { task, request } of waiting) {
    if (queue.items.some((q) => q.task.taskId === task.task_id) || a.worker.running.has(task.task_id))
      continue;
    queue.unwaited(queue.enqueue(toRun(a, task, request)), task.task_id);
  }
  queue.drain();
  return all.length + waiting.length;
}

/**
 * Subscribes to a running task's live events; returns the unsubscribe function, or undefined when the
 * task is not running here (it has ended: its stored events are all there is).
 */
function follow(a: AgentCore, taskId: string, listener: TaskListener): (() => void) | undefined {
  const running = a.worker.running.get(taskId);
  const task = running ?? a.queue.items.find((q) => q.task.taskId === taskId);
  if (!task) return undefined;
  task.listeners.add(listener);
  // Joining while the model writes: the text so far first, as one delta (the next ones follow on from it).
  const streamed = running?.streamed?.event;
  if (streamed) listener.live?.(streamed);
  return () => task.listeners.delete(listener);
}

/**
 * Stops a running task: in-flight model and tool calls are abandoned and no further call starts. Resolves
 * true once it has ended (or after `waitMs`), false when the task is not running here.
 */
async function cancel(a: AgentCore, taskId: string, waitMs: number): Promise<boolean> {
  const { deps, queue, worker } = a;
  const queued = await queue.withdraw(taskId);
  if (queued) {
    // Never started: claimed (so no other process starts it), it ends cancelled with nothing run.
    const claimed = await deps.store.claim(taskId).catch((err: unknown) => {
      // Not claimed (the database failing): it waits in the queue as before, and the client is told.
      queue.restore(queued);
      throw err;
    });
    if (claimed) queue.endCancelled(queued);
    if (claimed || (await queue.settled(taskId))) {
      await queued.done;
      return true;
    }
    queued.settle(
      queued.adopted ? Promise.resolve(undefined) : worker.ranElsewhere(queued.task.taskId, queued.listeners),
    );
  }
  const task = worker.running.get(taskId);
  if (!task) return false;
  task.controller.abort(new TaskStoppedError('cancelled', 'The task was cancelled by a client'));
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, waitMs);
  });
  await Promise.race([task.done, late]);
  clearTimeout(timer);
  return true;
}
