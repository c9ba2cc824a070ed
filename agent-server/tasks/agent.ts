import { randomUUID } from 'node:crypto';
import { HttpError } from '../../lib/http.ts';
import { createTokenCounter } from '../../lib/tokens.ts';
import type {
  ExecuteTaskRequest,
  ExecuteTaskResponse,
  PendingApproval,
  Task,
  TaskEvent,
} from '../contract.ts';
import { ModelNotConfiguredError, TaskStoppedError } from '../errors.ts';
import type { LoopSnapshot } from '../loop/loop.ts';
import type { TaskStore } from '../store/interface.ts';
import { createApprovalWaiter } from './approval-wait.ts';
import type { AgentDeps, TaskListener } from './deps.ts';
import { followElsewhere } from './follow.ts';
import { AgentShutdown, ResumedElsewhere, resultOf } from './outcome.ts';
import { createTaskQueue } from './queue.ts';
import { relayDecision, renderGoal, unknownOutcomeDecision } from './relay.ts';
import { launchTask, type QueuedRequest, type RunningTask, type TaskToRun, type Worker } from './run.ts';

// A task's lifecycle as the API sees it: start (at once, or queued), approvals, cancel, follow, shutdown and
// what a previous process left. The queue is queue.ts, one task's run is run.ts; this wires them to one
// worker's state.

/** What a paused task waits for, as stored and listed. */
type PendingRecord = PendingApproval;

export { resultOf };

/** A task's lifecycle: record it, run the loop apart from any request, store and publish every event. */
export type Agent = ReturnType<typeof createAgent>;

export function createAgent(deps: AgentDeps) {
  const running = new Map<string, RunningTask>();
  const paused = new Set<string>();
  const movedOn = new Set<string>();
  const tokens = deps.tokens ?? createTokenCounter();
  const defaultMaxDurationS = deps.defaultMaxDurationS ?? 1800;
  const maxConcurrent = deps.maxConcurrentTasks ?? 4;
  const maxQueued = deps.maxQueuedTasks ?? 1000;
  const queuePollMs = deps.queuePollMs ?? 1000;
  const slots = { claiming: 0, enqueuing: 0 };
  const active = () => running.size - paused.size + slots.claiming;

  // A task whose lease this worker lost (it lapsed; another worker may have claimed it) stops here at once:
  // its writes are refused from now on, and it goes on wherever it is claimed next.
  deps.store.onLeaseLost((taskId) => {
    const task = running.get(taskId);
    if (!task) return;
    movedOn.add(taskId);
    deps.log.warn({ task: taskId }, 'lost the lease of a running task; it goes on where it is claimed next');
    task.controller.abort(new ResumedElsewhere('this worker lost its lease (it lapsed)'));
  });

  const worker: Worker = {
    deps,
    tokens,
    running,
    paused,
    movedOn,
    waiter: createApprovalWaiter(deps.approvalPollMs ?? 1000),
    drain: () => queue.drain(),
    ranElsewhere: (taskId, listeners) => followElsewhere(deps.store, queuePollMs, taskId, listeners),
  };
  const launch = (task: Parameters<typeof launchTask>[1], opts?: Parameters<typeof launchTask>[2]) =>
    launchTask(worker, task, opts);
  const queue = createTaskQueue(worker, {
    slots,
    active,
    maxConcurrent,
    pollMs: queuePollMs,
    launch,
    toRun,
    resumePaused,
  });
  const { waiter } = worker;

  /**
   * Starts a task and returns once it is recorded; the task runs until it ends, whoever is listening. With
   * MAX_CONCURRENT_TASKS running it is queued (recorded as `queued`, started when a slot frees, also after a
   * restart); with the queue full too, refused with 503 and `retry-after`.
   */
  async function start(req: ExecuteTaskRequest, listener?: TaskListener) {
    if (!deps.model) throw new ModelNotConfiguredError();
    const waiting = () => queue.items.length + slots.enqueuing;
    const busy = active() >= maxConcurrent;
    if (busy && waiting() >= maxQueued) {
      const message =
        maxQueued === 0
          ? `${active()} tasks are running, the most this agent-server runs at once (MAX_CONCURRENT_TASKS=${maxConcurrent}); retry shortly`
          : `${active()} tasks are running (MAX_CONCURRENT_TASKS=${maxConcurrent}) and ${waiting()} wait for a slot, ` +
            `the most that may wait (MAX_QUEUED_TASKS=${maxQueued}); retry shortly`;
      throw new HttpError(503, message, {}, { 'retry-after': '5' });
    }
    const goal = req.prompt ? await renderGoal(deps.gateway, req.prompt) : (req.goal as string);
    const taskId = `task_${randomUUID()}`;
    const sessionId = req.session_id ?? `ses_${randomUUID()}`;
    const request: QueuedRequest = {
      maxSteps: req.max_steps ?? deps.defaultMaxSteps,
      maxDurationS: req.max_duration_s ?? defaultMaxDurationS,
      exposure: req.exposure ?? deps.exposure ?? 'native',
      prime: req.prime ?? deps.prime ?? true,
    };
    // Judged again after the awaits above: other requests may have taken the last slots meanwhile. The slot
    // (or the place in the queue) is this request's from here, while the task is recorded.
    const createdAt = new Date().toISOString();
    if (active() >= maxConcurrent || waiting() > 0) {
      slots.enqueuing++;
      try {
        await deps.store.createTask(taskId, sessionId, goal, { queued: true, request });
      } finally {
        slots.enqueuing--;
      }
      const done = queue.enqueue({ taskId, sessionId, goal, createdAt, ...request }, { listener });
      queue.drain();
      return { task_id: taskId, session_id: sessionId, done, status: 'queued' as 'running' | 'queued' };
    }
    slots.claiming++;
    try {
      await deps.store.createTask(taskId, sessionId, goal, { request });
    } finally {
      slots.claiming--;
    }
    return launch({ taskId, sessionId, goal, createdAt, ...request }, { listener });
  }

  /**
   * Waits here for the decision on a task stored as paused (its worker stopped, or paused it and moved on):
   * the first worker to see the decision claims the task (unpause) and goes on from the paused state. An
   * agent-server that runs no tasks (AGENT_ROLE=api) leaves it to the workers.
   */
  function resumePaused(paused: Awaited<ReturnType<TaskStore['awaiting']>>[number]): void {
    const taskId = paused.task.task_id;
    if (!paused.pending || !paused.state || running.has(taskId) || !deps.model || maxConcurrent === 0) return;
    launch(toRun(paused.task, paused.request), {
      resume: { pending: paused.pending as PendingRecord, snapshot: paused.state as LoopSnapshot },
    });
  }

  /** A stored task as a worker runs it (defaults for what a task recorded before requests were kept lacks). */
  function toRun(task: Task, request: unknown): TaskToRun {
    const r = (request ?? {}) as Partial<QueuedRequest>;
    return {
      taskId: task.task_id,
      sessionId: task.session_id,
      goal: task.goal,
      createdAt: task.created_at,
      maxSteps: r.maxSteps ?? deps.defaultMaxSteps,
      maxDurationS: r.maxDurationS ?? defaultMaxDurationS,
      exposure: r.exposure ?? deps.exposure ?? 'native',
      prime: r.prime ?? deps.prime ?? true,
    };
  }

  return {
    modelConfigured: deps.model !== undefined,
    start,

    /** Runs a task to its end; `onEvent` sees each event as it is recorded. */
    async execute(
      req: ExecuteTaskRequest,
      onEvent?: (event: TaskEvent) => void,
    ): Promise<ExecuteTaskResponse> {
      return (await start(req, onEvent ? { event: onEvent } : undefined)).done;
    },

    /** What paused tasks wait for. */
    pendingApprovals: async (): Promise<PendingApproval[]> =>
      (await deps.store.awaiting()).flatMap((t) => (t.pending ? [t.pending as PendingRecord] : [])),

    /**
     * A human's decision on what task `taskId` waits for: relayed to the gateway with the human's own
     * credential (`authorization`), then the task goes on — resumed from its stored state when this process
     * did not start it (a restart came between). `by` names the human's role, as the decision records it.
     */
    async decideApproval(
      taskId: string,
      callId: string,
      body: { approve: boolean; reason?: string; fail?: boolean },
      authorization: string | undefined,
      by: string,
    ): Promise<{
      task_id: string;
      call_id: string;
      status: string;
      decided_by: string | null;
      decided_at: string | null;
      reason: string | null;
    }> {
      const paused = (await deps.store.awaiting()).find((t) => t.task.task_id === taskId);
      const pending = paused?.pending as PendingRecord | undefined;
      if (!pending || pending.call_id !== callId) {
        // Decided already (by another human, another tab): the first decision stands, and this one is told so.
        const decided = (await deps.store.events(taskId)).find(
          (e) => e.type === 'approval_decided' && e.data.call_id === callId,
        );
        if (decided?.type === 'approval_decided') {
          throw new HttpError(
            409,
            `The call ${callId} of task ${taskId} was decided already (${decided.data.approved ? 'approved' : 'denied'}); the first decision stands`,
          );
        }
        throw new HttpError(
          404,
          `Task ${taskId} is not waiting for an approval of call ${callId}; GET /agent/approvals lists what tasks wait for`,
        );
      }
      let status: string;
      let decided = {
        decided_by: by as string | null,
        decided_at: new Date().toISOString() as string | null,
      };
      if (pending.kind === 'unknown_outcome') {
        // The agent-server's own question: decided in the store, where the waiting worker reads it.
        const decision = unknownOutcomeDecision(pending.subject, body, by, decided.decided_at as string);
        if (!(await deps.store.decide(taskId, callId, decision)))
          throw new HttpError(409, `The call ${callId} of task ${taskId} was decided already`);
        status = body.fail ? 'failed' : body.approve ? 'approved' : 'denied';
      } else {
        if (body.fail)
          throw new HttpError(
            400,
            '`fail` is for a call of unknown outcome; this approval takes approve only',
          );
        const approval = await relayDecision(deps.gateway, pending.approval_id, body, authorization);
        status = approval.status;
        decided = { decided_by: approval.decided_by, decided_at: approval.decided_at };
      }
      waiter.poke(taskId);
      // Workers in other processes waiting for it ask again now.
      if (pending.kind !== 'unknown_outcome') await deps.store.wake().catch(() => {});
      if (paused && !running.has(taskId)) resumePaused(paused);
      return { task_id: taskId, call_id: callId, status, ...decided, reason: body.reason ?? null };
    },

    /** Stops every task here without recording an end: paused ones stay paused for the next process. */
    async shutdown(): Promise<void> {
      queue.stop();
      // Queued tasks stay queued in the store for the next start; whoever waits for one is told so.
      for (const q of queue.items.splice(0)) {
        q.settle(
          Promise.resolve({
            status: 'failed' as const,
            final_answer: null,
            task_id: q.task.taskId,
            session_id: q.task.sessionId,
            steps: 0,
            usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
            toolsets_used: [],
            error:
              'the agent-server stopped before the task started; it stays queued and starts at the next start',
          }),
        );
      }
      const all = [...running.values()];
      for (const t of all) t.controller.abort(new AgentShutdown());
      await Promise.allSettled(all.map((t) => t.done));
    },

    /**
     * Picks up what a previous process left: paused tasks wait for their decision, then go on; queued ones wait
     * again in their order, with (an embedded store) the tasks it left running, which go on from their
     * checkpoints.
     */
    async resumeAll(): Promise<number> {
      const requeued = await deps.store.requeueLapsed(deps.store.embedded);
      if (requeued.length > 0)
        deps.log.warn({ tasks: requeued.length }, 'requeued tasks a stopped process left running');
      const all = await deps.store.awaiting();
      for (const t of all) resumePaused(t);
      // Tasks a previous process queued and never started wait again, in their order.
      const waiting = await deps.store.queued();
      for (const { task, request } of waiting) {
        if (queue.items.some((q) => q.task.taskId === task.task_id) || running.has(task.task_id)) continue;
        queue.unwaited(queue.enqueue(toRun(task, request)), task.task_id);
      }
      queue.drain();
      return all.length + waiting.length;
    },

    /**
     * Subscribes to a running task's live events; returns the unsubscribe function, or undefined when the
     * task is not running here (it has ended: its stored events are all there is).
     */
    follow(taskId: string, listener: TaskListener): (() => void) | undefined {
      const task = running.get(taskId) ?? queue.items.find((q) => q.task.taskId === taskId);
      if (!task) return undefined;
      task.listeners.add(listener);
      return () => task.listeners.delete(listener);
    },

    /**
     * Stops a running task: in-flight model and tool calls are abandoned and no further call starts. Resolves
     * true once it has ended (or after `waitMs`), false when the task is not running here.
     */
    async cancel(taskId: string, waitMs = 10_000): Promise<boolean> {
      const at = queue.items.findIndex((q) => q.task.taskId === taskId);
      if (at !== -1) {
        // Never started: claimed (so no other process starts it), it ends cancelled with nothing run.
        const [queued] = queue.items.splice(at, 1);
        const claimed = await deps.store.claim(taskId).catch((err: unknown) => {
          // Not claimed (the database failing): it waits in the queue as before, and the client is told.
          queue.items.splice(at, 0, queued);
          throw err;
        });
        if (claimed) {
          queued.settle(
            queue.endUnstarted(queued, 'cancelled', 'The task was cancelled by a client before it started'),
          );
          await queued.done;
          return true;
        }
        queued.settle(
          queued.adopted
            ? Promise.resolve(undefined)
            : worker.ranElsewhere(queued.task.taskId, queued.listeners),
        );
      }
      const task = running.get(taskId);
      if (!task) return false;
      task.controller.abort(new TaskStoppedError('cancelled', 'The task was cancelled by a client'));
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, waitMs);
      });
      await Promise.race([task.done, late]);
      clearTimeout(timer);
      return true;
    },
  };
}
