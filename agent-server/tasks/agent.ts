import { randomUUID } from 'node:crypto';
import { HttpError } from '../../lib/http.ts';
import { currentRequestId } from '../../lib/request-id.ts';
import { createTokenCounter } from '../../lib/tokens.ts';
import type { Model } from '../clients/model.ts';
import type {
  EventType,
  ExecuteTaskRequest,
  ExecuteTaskResponse,
  PendingApproval,
  Task,
  TaskEvent,
  ToolExposure,
} from '../contract.ts';
import { type LoopSnapshot, runLoop } from '../loop/loop.ts';
import type { RecordedCall } from '../loop/recovery.ts';
import type { ApprovalDecision } from '../loop/tool-step.ts';
import { type Claim, LeaseLost, type TaskStore } from '../store/interface.ts';
import { createApprovalWaiter, gatewayDecision, storedDecision } from './approval-wait.ts';
import type { AgentDeps, TaskListener } from './deps.ts';
import { ModelNotConfiguredError, TaskStoppedError } from './errors.ts';
import { observeEvent } from './observer.ts';
import { AgentShutdown, crashed, noSteps, ResumedElsewhere, resultOf } from './outcome.ts';
import { relayDecision, renderGoal, unknownOutcomeDecision } from './relay.ts';

/** What a paused task waits for, as stored and listed. */
type PendingRecord = PendingApproval;

interface RunningTask {
  controller: AbortController;
  listeners: Set<TaskListener>;
  done: Promise<ExecuteTaskResponse>;
}

/** What a task needs to start, kept with it while it waits in the queue (and across a restart). */
interface QueuedRequest {
  maxSteps: number;
  maxDurationS: number;
  exposure: ToolExposure;
}

/** A task as a worker runs it: its request, and when it was submitted (its time limit counts from then). */
type TaskToRun = { taskId: string; sessionId: string; goal: string; createdAt: string } & QueuedRequest;

/**
 * A checkpoint as stored: the offered tools without their descriptions and schemas (going on needs only which
 * toolset each belongs to and what it declares; the next request lists the tools afresh).
 */
function checkpointOf(snapshot: LoopSnapshot): LoopSnapshot {
  const tools = snapshot.pending.tools.map(({ name, toolset, annotations }) => ({
    name,
    toolset,
    annotations,
    description: '',
    parameters: {},
  }));
  return { ...snapshot, pending: { ...snapshot.pending, tools } };
}

/** How long a change to the queue heard from another process may wait for others to share one read. */
const QUEUE_WAKE_MS = 20;

/** The seconds left of a task's time limit (at least one). */
const remainingS = (maxDurationS: number, createdAt: string) =>
  Math.max(1, Math.ceil(maxDurationS - (Date.now() - Date.parse(createdAt)) / 1000));

/** A task waiting for a slot: who follows it, and its `done` for when it has run. */
interface QueuedTask {
  task: TaskToRun;
  listeners: Set<TaskListener>;
  settle: (launched: Promise<ExecuteTaskResponse | undefined>) => void;
  done: Promise<ExecuteTaskResponse>;
  /** Taken up from the store (no request here waits for it): if another process claims it, it is dropped. */
  adopted: boolean;
}

export { resultOf };

/** A task's lifecycle: record it, run the loop apart from any request, store and publish every event. */
export type Agent = ReturnType<typeof createAgent>;

export function createAgent(deps: AgentDeps) {
  const running = new Map<string, RunningTask>();
  const tokens = deps.tokens ?? createTokenCounter();
  const defaultMaxDurationS = deps.defaultMaxDurationS ?? 1800;

  // A task whose lease this worker lost (it lapsed; another worker may have claimed it) stops here at once:
  // its writes are refused from now on, and it goes on wherever it is claimed next.
  deps.store.onLeaseLost((taskId) => {
    const task = running.get(taskId);
    if (!task) return;
    movedOn.add(taskId);
    deps.log.warn({ task: taskId }, 'lost the lease of a running task; it goes on where it is claimed next');
    task.controller.abort(new ResumedElsewhere('this worker lost its lease (it lapsed)'));
  });
  /**
   * Tasks running here that go on in another worker (it resumed the paused task first, or this worker lost the
   * lease): whatever else stopped them, this worker writes nothing more of them.
   */
  const movedOn = new Set<string>();

  /** Tasks running or paused here, by id; `paused` are those waiting for an approval. */
  const paused = new Set<string>();
  const maxConcurrent = deps.maxConcurrentTasks ?? 4;
  const maxQueued = deps.maxQueuedTasks ?? 1000;
  const queuePollMs = deps.queuePollMs ?? 1000;
  /** Tasks waiting for a slot, oldest first; they start as running ones end or pause. */
  const queue: QueuedTask[] = [];
  /** Tasks being claimed or recorded as running right now (each will take a slot). */
  let claiming = 0;
  /** Tasks being recorded as queued right now (each will take a place in the queue). */
  let enqueuing = 0;
  /** A claim just failed: the queue waits for its next poll rather than trying again at once. */
  let failedClaim = false;
  const active = () => running.size - paused.size + claiming;

  /**
   * Starts queued tasks while there are free slots. Each is claimed in the store first (queued → running, only
   * if it is still queued), so when several agent-servers share one database a task runs on one of them; one
   * claimed elsewhere is followed in the store until it ends.
   */
  function drain(): void {
    while (queue.length > 0 && active() < maxConcurrent && deps.model) {
      const next = queue.shift() as QueuedTask;
      claiming++;
      void deps.store
        .claim(next.task.taskId)
        .then(
          (claimed) => {
            if (claimed) next.settle(launch(next.task, { listeners: next.listeners, claimed }).done);
            else
              next.settle(
                next.adopted ? Promise.resolve(undefined) : ranElsewhere(next.task.taskId, next.listeners),
              );
          },
          (err: unknown) => {
            deps.log.error({ err, task: next.task.taskId }, 'a queued task could not be started');
            queue.unshift(next);
            failedClaim = true;
          },
        )
        .finally(() => {
          claiming--;
          // After a failed claim (the database refusing), the next try waits for the queue's poll.
          if (failedClaim) failedClaim = false;
          else drain();
        });
    }
  }

  /** A task that goes on in another process (claimed or resumed there): its end, read from the store once there. */
  async function ranElsewhere(taskId: string, listeners: Set<TaskListener>): Promise<ExecuteTaskResponse> {
    // Read again when the other process records the task's end, or now and then.
    let wake: () => void = () => {};
    let told = false;
    const stopHearing = deps.store.onTaskEnd(taskId, () => {
      told = true;
      wake();
    });
    try {
      for (;;) {
        told = false;
        const task = await deps.store.getTask(taskId);
        if (task && !['queued', 'running', 'awaiting_approval'].includes(task.status)) {
          const result = resultOf(task);
          for (const l of listeners) l.end?.(result);
          return result;
        }
        if (told) continue;
        await new Promise<void>((r) => {
          const timer = setTimeout(r, queuePollMs);
          wake = () => {
            clearTimeout(timer);
            r();
          };
        });
      }
    } finally {
      stopHearing();
    }
  }

  /** Queues a recorded task; its `done` settles once it has run. */
  function enqueue(
    task: QueuedTask['task'],
    opts: { listener?: TaskListener; adopted?: boolean } = {},
  ): Promise<ExecuteTaskResponse> {
    let settle: QueuedTask['settle'] = () => {};
    const done = new Promise<ExecuteTaskResponse>((resolve, reject) => {
      settle = (launched) => launched.then((r) => resolve(r as ExecuteTaskResponse), reject);
    });
    queue.push({
      task,
      listeners: new Set(opts.listener ? [opts.listener] : []),
      settle,
      done,
      adopted: opts.adopted ?? false,
    });
    if (!opts.adopted) deps.log.info({ task: task.taskId, queued: queue.length }, 'task queued');
    return done;
  }

  /**
   * Reconciles the local queue with the store's: a task queued here that is no longer queued there was claimed
   * (or cancelled) by another process and is followed in the store; with free slots, queued tasks no one here
   * holds (left by a stopped process, or another's) are taken up. Returns how many were taken up.
   */
  async function syncQueue(): Promise<number> {
    // The sweeper: tasks whose worker stopped renewing their lease go back to the queue.
    const lapsed = await deps.store.requeueLapsed();
    if (lapsed.length > 0) deps.log.warn({ tasks: lapsed }, 'requeued tasks whose lease lapsed');
    // Paused tasks no one here waits for (their worker stopped): this worker waits for their decision too. An
    // embedded store has no other worker: its paused tasks all have their wait here since the start.
    if (!deps.store.embedded) for (const t of await deps.store.awaiting()) resumePaused(t);
    // Only tasks queued here before the read are judged by it (one queued meanwhile may be missing from it).
    const before = new Set(queue.map((q) => q.task.taskId));
    const waiting = await deps.store.queued();
    const stillQueued = new Set(waiting.map((w) => w.task.task_id));
    for (let i = queue.length - 1; i >= 0; i--) {
      const q = queue[i];
      if (stillQueued.has(q.task.taskId) || !before.has(q.task.taskId)) continue;
      queue.splice(i, 1);
      q.settle(q.adopted ? Promise.resolve(undefined) : ranElsewhere(q.task.taskId, q.listeners));
    }
    let adopted = 0;
    for (const { task, request } of waiting) {
      if (active() + adopted >= maxConcurrent) break;
      if (queue.some((q) => q.task.taskId === task.task_id) || running.has(task.task_id)) continue;
      void enqueue(toRun(task, request), { adopted: true });
      adopted++;
    }
    drain();
    return adopted;
  }

  // The queue in the store is read now and then (another agent-server's tasks, on a shared database), and
  // at once when another process says it changed; never two reads at a time (a change meanwhile reads again).
  let looking = false;
  let again = false;
  const look = () => {
    if (!deps.model || (queue.length === 0 && active() >= maxConcurrent)) return;
    if (looking) {
      again = true;
      return;
    }
    looking = true;
    syncQueue()
      .catch((err: unknown) => deps.log.warn({ err }, 'could not read the task queue'))
      .finally(() => {
        looking = false;
        if (again) {
          again = false;
          look();
        }
      });
  };
  const poll = setInterval(look, queuePollMs);
  poll.unref();
  let soon: NodeJS.Timeout | undefined;
  const stopHearing = deps.store.onQueueChange(() => {
    // A task queued, requeued or claimed, or a decision made elsewhere: paused tasks ask again, free slots
    // claim. A burst of changes (a thousand claims) is one read a few milliseconds later, not a thousand.
    soon ??= setTimeout(() => {
      soon = undefined;
      waiter.pokeAll();
      look();
    }, QUEUE_WAKE_MS);
  });
  const waiter = createApprovalWaiter(deps.approvalPollMs ?? 1000);

  /**
   * Runs a task's loop apart from any request: from the start, or (after a restart) from the pause it was
   * stored in, once its approval is decided.
   */
  function launch(
    task: Omit<TaskToRun, 'exposure'> & { exposure?: ToolExposure },
    opts: {
      listener?: TaskListener;
      /** The followers a queued task already has. */
      listeners?: Set<TaskListener>;
      resume?: { pending: PendingRecord; snapshot: LoopSnapshot };
      /** Claimed from the queue: a task that ran before goes on from its checkpoint. */
      claimed?: Claim;
    } = {},
  ) {
    const { taskId, sessionId, maxSteps } = task;
    const recovered = opts.claimed?.resumed
      ? {
          snapshot: (opts.claimed.state as LoopSnapshot | null) ?? null,
          recorded: opts.claimed.calls as RecordedCall[],
        }
      : undefined;
    // A task that ran before has the rest of its time (counted from its submission).
    const maxDurationS =
      recovered || opts.resume ? remainingS(task.maxDurationS, task.createdAt) : task.maxDurationS;
    const model = deps.model as Model;
    const gateway = deps.gateway.forTask(taskId);
    const controller = new AbortController();
    const listeners = opts.listeners ?? new Set<TaskListener>(opts.listener ? [opts.listener] : []);
    const emit = (type: EventType, data: Record<string, unknown>, durationMs?: number) => {
      if (movedOn.has(taskId)) return;
      const event = deps.store.appendEvent(taskId, type, durationMs ?? null, data);
      observeEvent(event, taskId, deps);
      for (const l of listeners) l.event(event);
    };
    const timer = setTimeout(() => {
      const why = `The task reached its time limit (max_duration_s = ${task.maxDurationS})`;
      controller.abort(new TaskStoppedError('timed_out', why));
    }, maxDurationS * 1000);

    /** Pauses on record, waits for the human, and says what was decided. */
    const decide = async (pending: PendingRecord, snapshot?: LoopSnapshot): Promise<ApprovalDecision> => {
      if (snapshot) {
        // The event first: the pause commits it with the paused state.
        emit('approval_needed', { ...pending });
        await deps.store.pause(taskId, pending, snapshot);
        deps.log.info(
          { task: taskId, approval: pending.approval_id, subject: pending.subject },
          'task awaits approval',
        );
      }
      paused.add(taskId);
      // A paused task takes no slot: a queued one may start.
      drain();
      /** Claims the paused task to go on with it here; false (and the task is left) when another worker did. */
      const claimPaused = async () => {
        if (await deps.store.unpause(taskId)) return true;
        movedOn.add(taskId);
        controller.abort(new ResumedElsewhere());
        return false;
      };
      try {
        const source =
          pending.kind === 'unknown_outcome'
            ? storedDecision(deps.store, taskId, pending.call_id)
            : gatewayDecision(gateway, pending);
        let decision: ApprovalDecision;
        try {
          decision = await waiter.wait(taskId, source, pending, controller.signal);
        } catch (err) {
          // Stopped while paused (its time limit, a cancel): only the worker that claims the task records its
          // end; another worker resumed it meanwhile: it goes on there. Stopping the process leaves it paused.
          if (err instanceof ResumedElsewhere) {
            movedOn.add(taskId);
            controller.abort(err);
          } else if (!(controller.signal.reason instanceof AgentShutdown)) await claimPaused();
          throw err;
        }
        if (!(await claimPaused())) throw controller.signal.reason;
        emit('approval_decided', {
          call_id: pending.call_id,
          approval_id: pending.approval_id,
          approved: decision.approved,
          ...(decision.message ? { message: decision.message } : {}),
        });
        return decision;
      } finally {
        paused.delete(taskId);
      }
    };

    if (!opts.resume && !recovered) {
      emit('task_started', {
        task_id: taskId,
        session_id: sessionId,
        goal: task.goal,
        max_steps: maxSteps,
        max_duration_s: maxDurationS,
        exposure: task.exposure ?? 'native',
        model: deps.modelName,
        request_id: currentRequestId() ?? null,
      });
    }
    const started = performance.now();
    const done = (async (): Promise<ExecuteTaskResponse> => {
      const outcome = await (async () => {
        const resume = opts.resume
          ? { snapshot: opts.resume.snapshot, decision: await decide(opts.resume.pending) }
          : undefined;
        return runLoop(
          { sessionId, goal: task.goal, maxSteps, resume, recovered, exposure: task.exposure },
          {
            model,
            modelName: deps.modelName,
            gateway,
            emit,
            tokens,
            signal: controller.signal,
            worker: deps.store.holder,
            journal: {
              checkpoint: (snapshot) => deps.store.checkpoint(taskId, checkpointOf(snapshot)),
              started: (index, callId) => deps.store.callStarted(taskId, index, callId),
              finished: (index, callId, result) => deps.store.callFinished(taskId, index, callId, result),
            },
            awaitApproval: (p, snapshot) =>
              decide(
                {
                  task_id: taskId,
                  call_id: p.call.id,
                  approval_id: p.approval.id,
                  kind: p.approval.kind,
                  subject: p.approval.subject,
                  arguments: p.approval.arguments,
                  reason: p.approval.reason,
                  expires_at: p.approval.expires_at,
                },
                snapshot,
              ),
          },
        );
      })().catch((err: unknown) => {
        const stop = err instanceof TaskStoppedError ? err : undefined;
        return stop
          ? { ...crashed(err, tokens.name), status: stop.reason, error: stop.message }
          : crashed(err, tokens.name);
      });
      clearTimeout(timer);
      const durationMs = Math.round(performance.now() - started);
      /** The task goes on in another worker: its end is read from the store once it is there. */
      const elsewhere = async () => {
        running.delete(taskId);
        movedOn.delete(taskId);
        await deps.store.release(taskId).catch(() => {});
        deps.log.info({ task: taskId }, 'task goes on in another agent-server');
        const result = await ranElsewhere(taskId, listeners);
        listeners.clear();
        return result;
      };
      if (movedOn.has(taskId) || controller.signal.reason instanceof ResumedElsewhere) return elsewhere();
      if (controller.signal.reason instanceof AgentShutdown) {
        // The process is stopping: a running task goes back to the queue (another worker, or the next start,
        // goes on from its checkpoint); a paused one stays paused.
        if (!paused.has(taskId))
          await deps.store
            .release(taskId)
            .catch((err: unknown) => deps.log.warn({ err, task: taskId }, 'could not requeue a task'));
        running.delete(taskId);
        listeners.clear();
        return {
          ...resultOf((await deps.store.getTask(taskId)) as Task),
          error: controller.signal.reason.message,
        };
      }
      try {
        emit(
          'task_finished',
          {
            status: outcome.status,
            error: outcome.error,
            steps: outcome.steps,
            usage: outcome.usage,
            tokens: outcome.tokens,
            toolsets_used: outcome.toolsets_used,
          },
          durationMs,
        );
      } finally {
        // In the same turn as the event (no reader sees one without the other); commits the task's last rows.
        await deps.store.finishTask(taskId, outcome).catch(async (err: unknown) => {
          if (err instanceof LeaseLost || movedOn.has(taskId)) return;
          // Not recorded (the database failing): the lease is let go, so once it lapses the task is requeued
          // and goes on from its checkpoint; whoever waits here is told.
          running.delete(taskId);
          await deps.store.release(taskId).catch(() => {});
          throw err;
        });
      }
      // The lease was lost as the task ended: the worker that holds it now records its end.
      if (movedOn.has(taskId)) return elsewhere();
      const result: ExecuteTaskResponse = {
        status: outcome.status,
        final_answer: outcome.final_answer,
        task_id: taskId,
        session_id: sessionId,
        steps: outcome.steps,
        usage: outcome.usage,
        toolsets_used: outcome.toolsets_used,
        tokens: outcome.tokens,
        duration_ms: durationMs,
        ...(outcome.error ? { error: outcome.error } : {}),
      };
      running.delete(taskId);
      for (const l of listeners) l.end?.(result);
      listeners.clear();
      drain();
      return result;
    })();
    running.set(taskId, { controller, listeners, done });
    // A task that could not record its end rejects `done` for its waiters; nobody waiting is no crash.
    done.catch((err: unknown) => deps.log.error({ err, task: taskId }, 'a task ended unrecorded'));
    return { task_id: taskId, session_id: sessionId, done, status: 'running' as 'running' | 'queued' };
  }

  /** Ends a queued task that never started, recording why (and telling its followers). */
  async function endUnstarted(q: QueuedTask, status: 'cancelled', why: string): Promise<ExecuteTaskResponse> {
    const { taskId, sessionId } = q.task;
    const outcome = noSteps(status, why, tokens.name);
    const { final_answer: _none, ...data } = outcome;
    const event = deps.store.appendEvent(taskId, 'task_finished', 0, data);
    for (const l of q.listeners) l.event(event);
    await deps.store.finishTask(taskId, outcome);
    const result: ExecuteTaskResponse = {
      ...outcome,
      task_id: taskId,
      session_id: sessionId,
      duration_ms: 0,
      error: why,
    };
    for (const l of q.listeners) l.end?.(result);
    return result;
  }

  /**
   * Starts a task and returns once it is recorded; the task runs until it ends, whoever is listening. With
   * MAX_CONCURRENT_TASKS running it is queued (recorded as `queued`, started when a slot frees, also after a
   * restart); with the queue full too, refused with 503 and `retry-after`.
   */
  async function start(req: ExecuteTaskRequest, listener?: TaskListener) {
    if (!deps.model) throw new ModelNotConfiguredError();
    const waiting = () => queue.length + enqueuing;
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
    };
    // Judged again after the awaits above: other requests may have taken the last slots meanwhile. The slot
    // (or the place in the queue) is this request's from here, while the task is recorded.
    const createdAt = new Date().toISOString();
    if (active() >= maxConcurrent || waiting() > 0) {
      enqueuing++;
      try {
        await deps.store.createTask(taskId, sessionId, goal, { queued: true, request });
      } finally {
        enqueuing--;
      }
      const done = enqueue({ taskId, sessionId, goal, createdAt, ...request }, { listener });
      drain();
      return { task_id: taskId, session_id: sessionId, done, status: 'queued' as 'running' | 'queued' };
    }
    claiming++;
    try {
      await deps.store.createTask(taskId, sessionId, goal, { request });
    } finally {
      claiming--;
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
     * did not start it (a restart came between).
     */
    async decideApproval(
      taskId: string,
      callId: string,
      body: { approve: boolean; reason?: string; fail?: boolean },
      authorization: string | undefined,
    ): Promise<{ task_id: string; call_id: string; status: string }> {
      const paused = (await deps.store.awaiting()).find((t) => t.task.task_id === taskId);
      const pending = paused?.pending as PendingRecord | undefined;
      if (!pending || pending.call_id !== callId) {
        throw new HttpError(
          404,
          `Task ${taskId} is not waiting for an approval of call ${callId}; GET /agent/approvals lists what tasks wait for`,
        );
      }
      let status: string;
      if (pending.kind === 'unknown_outcome') {
        // The agent-server's own question: decided in the store, where the waiting worker reads it.
        if (!(await deps.store.decide(taskId, callId, unknownOutcomeDecision(pending.subject, body))))
          throw new HttpError(409, `The call ${callId} of task ${taskId} was decided already`);
        status = body.fail ? 'failed' : body.approve ? 'approved' : 'denied';
      } else {
        if (body.fail)
          throw new HttpError(
            400,
            '`fail` is for a call of unknown outcome; this approval takes approve only',
          );
        status = (await relayDecision(deps.gateway, pending.approval_id, body, authorization)).status;
      }
      waiter.poke(taskId);
      // Workers in other processes waiting for it ask again now.
      if (pending.kind !== 'unknown_outcome') await deps.store.wake().catch(() => {});
      if (paused && !running.has(taskId)) resumePaused(paused);
      return { task_id: taskId, call_id: callId, status };
    },

    /** Stops every task here without recording an end: paused ones stay paused for the next process. */
    async shutdown(): Promise<void> {
      clearInterval(poll);
      clearTimeout(soon);
      stopHearing();
      // Queued tasks stay queued in the store for the next start; whoever waits for one is told so.
      for (const q of queue.splice(0)) {
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
        if (queue.some((q) => q.task.taskId === task.task_id) || running.has(task.task_id)) continue;
        void enqueue(toRun(task, request));
      }
      drain();
      return all.length + waiting.length;
    },

    /**
     * Subscribes to a running task's live events; returns the unsubscribe function, or undefined when the
     * task is not running here (it has ended: its stored events are all there is).
     */
    follow(taskId: string, listener: TaskListener): (() => void) | undefined {
      const task = running.get(taskId) ?? queue.find((q) => q.task.taskId === taskId);
      if (!task) return undefined;
      task.listeners.add(listener);
      return () => task.listeners.delete(listener);
    },

    /**
     * Stops a running task: in-flight model and tool calls are abandoned and no further call starts. Resolves
     * true once it has ended (or after `waitMs`), false when the task is not running here.
     */
    async cancel(taskId: string, waitMs = 10_000): Promise<boolean> {
      const at = queue.findIndex((q) => q.task.taskId === taskId);
      if (at !== -1) {
        // Never started: claimed (so no other process starts it), it ends cancelled with nothing run.
        const [queued] = queue.splice(at, 1);
        const claimed = await deps.store.claim(taskId).catch((err: unknown) => {
          // Not claimed (the database failing): it waits in the queue as before, and the client is told.
          queue.splice(at, 0, queued);
          throw err;
        });
        if (claimed) {
          queued.settle(
            endUnstarted(queued, 'cancelled', 'The task was cancelled by a client before it started'),
          );
          await queued.done;
          return true;
        }
        queued.settle(
          queued.adopted ? Promise.resolve(undefined) : ranElsewhere(queued.task.taskId, queued.listeners),
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
