import { StoreUnavailable } from '../../lib/db-reachability.ts';
import { currentRequestId } from '../../lib/request-id.ts';
import type { TokenCounter } from '../../lib/tokens.ts';
import { withSpanHolder } from '../../lib/tracing.ts';
import type { Model } from '../clients/model.ts';
import type {
  EventType,
  ExecuteTaskResponse,
  PendingApproval,
  Task,
  TaskEvent,
  ToolExposure,
} from '../contract.ts';
import { TaskStoppedError } from '../errors.ts';
import { type LoopSnapshot, runLoop } from '../loop/loop.ts';
import type { RecordedCall } from '../loop/recovery.ts';
import type { ApprovalDecision } from '../loop/tool-step.ts';
import { type Claim, LeaseLost, type TaskStore } from '../store/interface.ts';
import { type ApprovalWaiter, gatewayDecision, type HumanDecision, storedDecision } from './approval-wait.ts';
import type { AgentDeps, TaskListener } from './deps.ts';
import { ridingOutages } from './gateway-retry.ts';
import { observeEvent } from './observer.ts';
import { AgentShutdown, crashed, ResumedElsewhere, resultOf } from './outcome.ts';
import { TaskTrace } from './trace.ts';

// One task's run in this process (launchTask): its loop apart from any request, its events stored and
// published, its pauses for a human, and its end — or, when another worker goes on with it, following it
// there (followElsewhere). The queue that starts tasks is queue.ts; agent.ts wires the two.

/** What a paused task waits for, as stored and listed. */
type PendingRecord = PendingApproval;

/** A task running (or paused) here. */
export interface RunningTask {
  controller: AbortController;
  listeners: Set<TaskListener>;
  done: Promise<ExecuteTaskResponse>;
}

/** What a task needs to start, kept with it while it waits in the queue (and across a restart). */
export interface QueuedRequest {
  maxSteps: number;
  maxDurationS: number;
  exposure: ToolExposure;
  /** Activate the toolset discovery is certain of before the first model call (absent: no). */
  prime?: boolean;
}

/** A task as a worker runs it: its request, and when it was submitted (its time limit counts from then). */
export type TaskToRun = {
  taskId: string;
  sessionId: string;
  goal: string;
  createdAt: string;
} & QueuedRequest;

/** This process's tasks, shared by the queue and the runs. */
export interface Worker {
  deps: AgentDeps;
  tokens: TokenCounter;
  /** Tasks running or paused here, by id. */
  running: Map<string, RunningTask>;
  /** Those of them waiting for an approval (they take no slot). */
  paused: Set<string>;
  /**
   * Tasks running here that go on in another worker (it resumed the paused task first, or this worker lost the
   * lease): whatever else stopped them, this worker writes nothing more of them.
   */
  movedOn: Set<string>;
  waiter: ApprovalWaiter;
  /** Starts queued tasks while slots are free. */
  drain(): void;
  /** Follows a task that goes on in another process until its end. */
  ranElsewhere(taskId: string, listeners: Set<TaskListener>): Promise<ExecuteTaskResponse>;
}

/**
 * A checkpoint as stored: the offered tools without their descriptions and schemas (going on needs only which
 * toolset each belongs to and what it declares; the next request lists the tools afresh).
 */
function checkpointOf(snapshot: LoopSnapshot, trace?: LoopSnapshot['trace']): LoopSnapshot {
  const tools = snapshot.pending.tools.map(({ name, toolset, annotations }) => ({
    name,
    toolset,
    annotations,
    description: '',
    parameters: {},
  }));
  return { ...snapshot, ...(trace ? { trace } : {}), pending: { ...snapshot.pending, tools } };
}

/** The seconds left of a task's time limit (at least one). */
const remainingS = (maxDurationS: number, createdAt: string) =>
  Math.max(1, Math.ceil(maxDurationS - (Date.now() - Date.parse(createdAt)) / 1000));

/** A task that goes on in another process (claimed or resumed there): its end, read from the store once there. */
export async function followElsewhere(
  store: TaskStore,
  pollMs: number,
  taskId: string,
  listeners: Set<TaskListener>,
): Promise<ExecuteTaskResponse> {
  // Read again when the other process records the task's end, or now and then.
  let wake: () => void = () => {};
  let told = false;
  const stopHearing = store.onTaskEnd(taskId, () => {
    told = true;
    wake();
  });
  try {
    for (;;) {
      told = false;
      // The database unreachable: read again once it may be back (its end is recorded there, whenever).
      const task = await store.getTask(taskId).catch((err: unknown) => {
        if (err instanceof StoreUnavailable) return null;
        throw err;
      });
      if (task && !['queued', 'running', 'awaiting_approval'].includes(task.status)) {
        const result = resultOf(task);
        for (const l of listeners) l.end?.(result);
        return result;
      }
      if (told && task !== null) continue;
      await new Promise<void>((r) => {
        const timer = setTimeout(r, pollMs);
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

export function launchTask(
  w: Worker,
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
  const model = w.deps.model as Model;
  const controller = new AbortController();
  // Through a blip of the gateway's database the task waits for the gateway rather than failing.
  const gateway = ridingOutages(w.deps.gateway.forTask(taskId), controller.signal, (err) =>
    w.deps.log.warn({ err, task: taskId }, 'the gateway cannot reach its database; the task waits for it'),
  );
  const listeners = opts.listeners ?? new Set<TaskListener>(opts.listener ? [opts.listener] : []);
  // Its spans (tracing on): made from its events; a task going on links to the attempt it goes on from.
  const traced = TaskTrace.for({
    taskId,
    sessionId,
    model: w.deps.modelName,
    exposure: task.exposure ?? 'native',
    baseURL: w.deps.modelBaseURL,
    requestId: currentRequestId() ?? null,
  });
  if (opts.resume) traced?.resumeWaiting(opts.resume.snapshot.trace);
  else if (recovered) traced?.begin(recovered.snapshot?.trace);
  const emit = (type: EventType, data: Record<string, unknown>, durationMs?: number) => {
    if (w.movedOn.has(taskId)) return;
    // Tracing never stops a task: a fault in it costs the span, not the event.
    try {
      traced?.event(type, data);
    } catch (err) {
      w.deps.log.warn({ err, task: taskId, event: type }, 'tracing: the event was not traced');
    }
    const event = w.deps.store.appendEvent(taskId, type, durationMs ?? null, data);
    observeEvent(event, taskId, w.deps);
    for (const l of listeners) l.event(event);
  };
  const timer = setTimeout(() => {
    const why = `The task reached its time limit (max_duration_s = ${task.maxDurationS})`;
    controller.abort(new TaskStoppedError('timed_out', why));
  }, maxDurationS * 1000);

  /** Pauses on record, waits for the human, and says what was decided. */
  const decide = async (pending: PendingRecord, snapshot?: LoopSnapshot): Promise<ApprovalDecision> => {
    if (snapshot) {
      // Logged in the call's span (its trace ids on the line); the event then ends that attempt's trace.
      w.deps.log.info(
        { task: taskId, approval: pending.approval_id, subject: pending.subject },
        'task awaits approval',
      );
      // The event first: the pause commits it with the paused state.
      emit('approval_needed', { ...pending });
      await w.deps.store.pause(
        taskId,
        pending,
        traced ? { ...snapshot, trace: traced.stored() } : snapshot,
        snapshot.steps,
      );
    }
    w.paused.add(taskId);
    // A paused task takes no slot: a queued one may start.
    w.drain();
    /** Claims the paused task to go on with it here; false (and the task is left) when another worker did. */
    const claimPaused = async () => {
      if (await w.deps.store.unpause(taskId)) return true;
      w.movedOn.add(taskId);
      controller.abort(new ResumedElsewhere());
      return false;
    };
    try {
      const source =
        pending.kind === 'unknown_outcome'
          ? storedDecision(w.deps.store, taskId, pending.call_id)
          : gatewayDecision(gateway, pending);
      let decision: HumanDecision;
      try {
        decision = await w.waiter.wait(taskId, source, pending, controller.signal);
      } catch (err) {
        // Stopped while paused (its time limit, a cancel): only the worker that claims the task records its
        // end; another worker resumed it meanwhile: it goes on there. Stopping the process leaves it w.paused.
        if (err instanceof ResumedElsewhere) {
          w.movedOn.add(taskId);
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
        decided_by: decision.decided_by ?? null,
        decided_at: decision.decided_at ?? null,
        reason: decision.reason ?? null,
      });
      return decision;
    } finally {
      w.paused.delete(taskId);
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
      model: w.deps.modelName,
      request_id: currentRequestId() ?? null,
    });
  }
  const started = performance.now();
  const run = async (): Promise<ExecuteTaskResponse> => {
    const outcome = await (async () => {
      const resume = opts.resume
        ? { snapshot: opts.resume.snapshot, decision: await decide(opts.resume.pending) }
        : undefined;
      // Starting over, the task's own events say what was primed for it the first time.
      const primed =
        recovered && !recovered.snapshot && task.prime
          ? primedIn(await w.deps.store.events(taskId))
          : undefined;
      return runLoop(
        {
          sessionId,
          goal: task.goal,
          maxSteps,
          resume,
          recovered: recovered && { ...recovered, primed },
          exposure: task.exposure,
          prime: task.prime,
        },
        {
          model,
          modelName: w.deps.modelName,
          gateway,
          emit,
          tokens: w.tokens,
          signal: controller.signal,
          worker: w.deps.store.holder,
          calls: { taskId, fence: () => w.deps.store.fenceOf(taskId) },
          trace: traced,
          journal: {
            checkpoint: (snapshot) =>
              w.deps.store.checkpoint(taskId, checkpointOf(snapshot, traced?.stored()), snapshot.steps),
            started: (index, callId) => w.deps.store.callStarted(taskId, index, callId),
            finished: (index, callId, result) => w.deps.store.callFinished(taskId, index, callId, result),
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
        ? { ...crashed(err, w.tokens.name), status: stop.reason, error: stop.message }
        : crashed(err, w.tokens.name);
    });
    clearTimeout(timer);
    const durationMs = Math.round(performance.now() - started);
    /** The task goes on in another worker: its end is read from the store once it is there. */
    const elsewhere = async () => {
      // Whatever of its trace is still open ends here; the worker going on starts an attempt linked to it.
      traced?.release('elsewhere');
      w.running.delete(taskId);
      w.movedOn.delete(taskId);
      await w.deps.store.release(taskId).catch(() => {});
      w.deps.log.info({ task: taskId }, 'task goes on in another agent-server');
      const result = await w.ranElsewhere(taskId, listeners);
      listeners.clear();
      return result;
    };
    if (w.movedOn.has(taskId) || controller.signal.reason instanceof ResumedElsewhere) return elsewhere();
    if (controller.signal.reason instanceof AgentShutdown) {
      traced?.release('shutdown');
      // The process is stopping: a running task goes back to the queue (another worker, or the next start,
      // goes on from its checkpoint); a paused one stays w.paused.
      if (!w.paused.has(taskId))
        await w.deps.store
          .release(taskId)
          .catch((err: unknown) => w.deps.log.warn({ err, task: taskId }, 'could not requeue a task'));
      w.running.delete(taskId);
      listeners.clear();
      return {
        ...resultOf((await w.deps.store.getTask(taskId)) as Task),
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
      await w.deps.store.finishTask(taskId, outcome).catch(async (err: unknown) => {
        if (err instanceof LeaseLost || w.movedOn.has(taskId)) return;
        // Not recorded (the database failing): the lease is let go, so once it lapses the task is requeued
        // and goes on from its checkpoint; whoever waits here is told.
        w.running.delete(taskId);
        await w.deps.store.release(taskId).catch(() => {});
        throw err;
      });
    }
    // The lease was lost as the task ended: the worker that holds it now records its end.
    if (w.movedOn.has(taskId)) return elsewhere();
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
    w.running.delete(taskId);
    for (const l of listeners) l.end?.(result);
    listeners.clear();
    w.drain();
    return result;
  };
  // The task's calls carry its current span (lib/tracing.ts), whichever attempt that is.
  const done = traced ? withSpanHolder(traced, run) : run();
  w.running.set(taskId, { controller, listeners, done });
  // A task that could not record its end rejects `done` for its waiters; nobody waiting is no crash.
  done.catch((err: unknown) => w.deps.log.error({ err, task: taskId }, 'a task ended unrecorded'));
  return { task_id: taskId, session_id: sessionId, done, status: 'running' as 'running' | 'queued' };
}

/** The toolsets a task's goal priming activated, from its events (loop/prime.ts emits them marked `primed`). */
function primedIn(events: readonly TaskEvent[]): string[] {
  return events.flatMap((e) =>
    e.type === 'toolset_change' && e.data.primed === true && e.data.action === 'ACTIVATE'
      ? e.data.toolset_ids
      : [],
  );
}
