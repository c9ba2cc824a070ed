import { currentRequestId } from '../../lib/http/request-id.ts';
import { withSpanHolder } from '../../lib/telemetry/tracing.ts';
import type { Model } from '../clients/model.ts';
import type {
  EventType,
  ModelDeltaEvent,
  PendingApproval,
  PendingConsent,
  TaskEvent,
  ToolExposure,
} from '../contract.ts';
import { TaskStoppedError } from '../errors.ts';
import type { LiveEmit } from '../loop/deltas.ts';
import { type LoopDeps, type LoopOutcome, type LoopSnapshot, runLoop } from '../loop/loop.ts';
import type { RecordedCall } from '../loop/recovery.ts';
import { transcriptOfSaved } from '../loop/state.ts';
import type { Claim } from '../store/interface.ts';
import { checkpointWriter } from './checkpoint.ts';
import type { TaskListener } from './deps.ts';
import { endTask } from './end.ts';
import { ridingOutages } from './gateway-retry.ts';
import { observeEvent } from './observer.ts';
import { crashed } from './outcome.ts';
import { awaitConsent, decide } from './pause.ts';
import { threadInput } from './threads.ts';
import { TaskTrace } from './trace.ts';
import type { TaskRun, TaskToRun, Worker } from './worker.ts';

// One task's run in this process (launchTask): its loop apart from any request, its events stored and
// published, its checkpoints and calls on record; its pauses for a human are pause.ts, its end (or following
// it to the worker that goes on with it) end.ts. The queue that starts tasks is queue.ts; agent.ts wires them.

export type { QueuedRequest, RunningTask, TaskToRun, Worker } from './worker.ts';

/** How a task is launched: who follows it, and whether it goes on from a pause or another worker's claim. */
export interface LaunchOptions {
  listener?: TaskListener;
  /** The followers a queued task already has. */
  listeners?: Set<TaskListener>;
  resume?: { pending: PendingApproval | PendingConsent; snapshot: LoopSnapshot };
  /** Claimed from the queue: a task that ran before goes on from its checkpoint. */
  claimed?: Claim;
}

/**
 * Going on from another worker's claim: its last checkpoint (null: none), the calls it recorded since, and why
 * the checkpoint could not be read, if it could not.
 */
type Recovered = { snapshot: LoopSnapshot | null; recorded: RecordedCall[]; unreadable?: string } | undefined;

/** The seconds left of a task's time limit (at least one). */
const remainingS = (maxDurationS: number, createdAt: string) =>
  Math.max(1, Math.ceil(maxDurationS - (Date.now() - Date.parse(createdAt)) / 1000));

export function launchTask(
  w: Worker,
  task: Omit<TaskToRun, 'exposure'> & { exposure?: ToolExposure },
  opts: LaunchOptions = {},
) {
  const { taskId, sessionId } = task;
  const recovered: Recovered = opts.claimed?.resumed
    ? {
        snapshot: (opts.claimed.state as LoopSnapshot | null) ?? null,
        recorded: opts.claimed.calls as RecordedCall[],
        unreadable: opts.claimed.unreadable,
      }
    : undefined;
  // A task that ran before has the rest of its time (counted from its submission).
  const maxDurationS =
    recovered || opts.resume ? remainingS(task.maxDurationS, task.createdAt) : task.maxDurationS;
  const controller = new AbortController();
  // Through a blip of the gateway's database the task waits for the gateway rather than failing.
  const gateway = ridingOutages(
    w.deps.gateway.forTask(taskId),
    controller.signal,
    (err) =>
      w.deps.log.warn(
        { err, task: taskId },
        'the gateway cannot be reached, or its database; the task waits',
      ),
    w.deps.gatewayAwayMs,
  );
  const listeners = opts.listeners ?? new Set<TaskListener>(opts.listener ? [opts.listener] : []);
  const traced = traceOf(w, task, opts, recovered);
  const streamed: { event?: ModelDeltaEvent } = {};
  const emit = taskEmitter(w, taskId, listeners, traced, streamed);
  const t: TaskRun = { w, task, taskId, controller, gateway, listeners, traced, emit, streamed };
  const timer = setTimeout(() => {
    const why = `The task reached its time limit (max_duration_s = ${task.maxDurationS})`;
    controller.abort(new TaskStoppedError('timed_out', why));
  }, maxDurationS * 1000);
  if (!opts.resume && !recovered) {
    emit('task_started', {
      task_id: taskId,
      session_id: sessionId,
      thread_id: task.threadId,
      goal: task.goal,
      max_steps: task.maxSteps,
      max_duration_s: maxDurationS,
      exposure: task.exposure ?? 'native',
      model: w.deps.modelName,
      request_id: currentRequestId() ?? null,
    });
  }
  const started = performance.now();
  const run = async () => {
    const outcome = await loopOf(t, opts, recovered);
    clearTimeout(timer);
    return endTask(t, outcome, Math.round(performance.now() - started));
  };
  // The task's calls carry its current span (lib/telemetry/tracing.ts), whichever attempt that is.
  const done = traced ? withSpanHolder(traced, run) : run();
  w.running.set(taskId, { controller, listeners, done, streamed });
  // A task that could not record its end rejects `done` for its waiters; nobody waiting is no crash.
  done.catch((err: unknown) => w.deps.log.error({ err, task: taskId }, 'a task ended unrecorded'));
  return {
    task_id: taskId,
    session_id: sessionId,
    thread_id: task.threadId,
    done,
    status: 'running' as 'running' | 'queued',
  };
}

/** Its spans (tracing on): made from its events; a task going on links to the attempt it goes on from. */
function traceOf(w: Worker, task: TaskRun['task'], opts: LaunchOptions, recovered: Recovered) {
  const traced = TaskTrace.for({
    taskId: task.taskId,
    sessionId: task.sessionId,
    model: w.deps.modelName,
    exposure: task.exposure ?? 'native',
    baseURL: w.deps.modelBaseURL,
    provider: w.deps.modelProvider,
    requestId: currentRequestId() ?? null,
  });
  if (opts.resume) traced?.resumeWaiting(opts.resume.snapshot.trace);
  else if (recovered) traced?.begin(recovered.snapshot?.trace);
  return traced;
}

/** How the task records an event: traced, stored, observed and told to its listeners, unless it moved on. */
function taskEmitter(
  w: Worker,
  taskId: string,
  listeners: Set<TaskListener>,
  traced: TaskTrace | undefined,
  streamed: { event?: ModelDeltaEvent },
): TaskRun['emit'] {
  return (type: EventType, data: Record<string, unknown>, durationMs?: number) => {
    if (w.movedOn.has(taskId)) return;
    // The reply is on record now: what streamed of it is no longer news to a follower who joins.
    if (type === 'model_call') streamed.event = undefined;
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
}

/** How the task tells its listeners what is not stored (the model's text as it streams): no seq, no trace. */
function liveEmitter({ w, taskId, listeners, streamed }: TaskRun): LiveEmit {
  return (type, data) => {
    if (w.movedOn.has(taskId)) return;
    const event: ModelDeltaEvent = { type, at: new Date().toISOString(), data };
    // The reply's text so far (this step's attempt), for a follower who joins while it streams.
    const so = streamed.event?.data;
    const same = so && so.step === data.step && so.attempt === data.attempt;
    streamed.event = same ? { ...event, data: { ...data, text: so.text + data.text } } : event;
    for (const l of listeners) l.live?.(event);
  };
}

/** The task's loop, going on from a pause or another worker's claim; a failure outside it ends it crashed. */
async function loopOf(t: TaskRun, opts: LaunchOptions, recovered: Recovered): Promise<LoopOutcome> {
  const { w, task, taskId } = t;
  try {
    // Going on from a checkpoint that cannot be read would run its calls again: the task ends, saying why.
    if (recovered?.unreadable) throw new Error(recovered.unreadable);
    const resume = opts.resume
      ? { snapshot: opts.resume.snapshot, decision: await decisionOn(t, opts.resume.pending) }
      : undefined;
    // Starting over, the task's own events say what was primed for it the first time.
    const primed =
      recovered && !recovered.snapshot && (task.prime || task.exposure === 'auto')
        ? primedIn(await w.deps.store.events(taskId))
        : undefined;
    // Going on from a saved loop, its conversation holds the thread's earlier turns already.
    const fresh = !resume && !recovered?.snapshot;
    const thread = fresh && task.threadId ? await threadInput(w.deps.store, task.threadId) : undefined;
    const owner = await ownerOfTask(t);
    const quota = owner === undefined ? undefined : await w.deps.quotaOf?.(owner);
    return await runLoop(
      {
        sessionId: task.sessionId,
        goal: task.goal,
        maxSteps: task.maxSteps,
        thread,
        resume,
        recovered: recovered && { ...recovered, primed },
        exposure: task.exposure,
        prime: task.prime,
      },
      // Its calls at the gateway are its owner's work (a user's, for their audit and approvals).
      { ...loopDeps(t, owner), gateway: t.gateway.forTask(taskId, owner), quota },
    );
  } catch (err) {
    const stop = err instanceof TaskStoppedError ? err : undefined;
    const outcome = stop
      ? { ...crashed(err, w.tokens.name), status: stop.reason, error: stop.message }
      : crashed(err, w.tokens.name);
    // Ended before its loop went on from where it was saved: the thread keeps what it had done.
    const saved = opts.resume?.snapshot ?? recovered?.snapshot;
    return saved
      ? { ...outcome, transcript: transcriptOfSaved(saved, outcome.status, w.tokens.name) }
      : outcome;
  }
}

/**
 * What a task going on from a pause waits for first: the decision on its call, or its owner's consent (given,
 * the call is made again as if new: no decision).
 */
async function decisionOn(t: TaskRun, pending: PendingApproval | PendingConsent) {
  if (pending.kind !== 'consent') return decide(t, pending);
  const consent = await awaitConsent(t, pending);
  return consent.fail ? consent : undefined;
}

/** Whose the task is: its thread's owner (undefined for a task of no thread). */
async function ownerOfTask(t: TaskRun): Promise<string | undefined> {
  if (!t.task.threadId) return undefined;
  return (await t.w.deps.store.getThread(t.task.threadId))?.owner;
}

/**
 * What the loop works with here: this worker's model and gateway, the task's journal in the store, its pauses
 * (for a consent only when a person owns the task: the gateway asks no one else for theirs).
 */
function loopDeps(t: TaskRun, owner: string | undefined): LoopDeps {
  const { w, taskId, traced } = t;
  const checkpoints = checkpointWriter(w.deps.store, taskId, () => traced?.stored());
  return {
    model: w.deps.model as Model,
    modelName: w.deps.modelName,
    gateway: t.gateway,
    emit: t.emit,
    live: liveEmitter(t),
    tokens: w.tokens,
    signal: t.controller.signal,
    worker: w.deps.store.holder,
    cacheKey: t.task.threadId ?? taskId,
    calls: { taskId, fence: () => w.deps.store.fenceOf(taskId) },
    trace: traced,
    contextTokens: w.deps.contextTokens,
    ...(w.deps.scriptLimits ? { scriptLimits: w.deps.scriptLimits } : {}),
    autoExposureTokens: w.deps.autoExposureTokens,
    journal: {
      checkpoint: (snapshot) => checkpoints.write(snapshot),
      started: (index, callId) => w.deps.store.callStarted(taskId, index, callId),
      finished: (index, callId, result) => w.deps.store.callFinished(taskId, index, callId, result),
    },
    // A pause stores its state whole: the checkpoint after it is a base.
    awaitApproval: (p, snapshot) => {
      checkpoints.rebase();
      return decide(
        t,
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
      );
    },
    awaitConsent: owner?.startsWith('user:')
      ? (p, snapshot) => {
          checkpoints.rebase();
          return awaitConsent(
            t,
            {
              task_id: taskId,
              call_id: p.call.id,
              kind: 'consent',
              toolset: p.consent.toolset,
              connect_url: p.consent.connect_url,
              owner,
              step: snapshot.pending.step,
              expires_at: new Date(Date.now() + (w.deps.consentTimeoutS ?? 3600) * 1000).toISOString(),
            },
            snapshot,
          );
        }
      : undefined,
  };
}

/**
 * The toolsets activated for a task before its first model call, from its events (loop/prime.ts marks them
 * `primed`, or `all_loaded` for an auto task's small catalog).
 */
function primedIn(events: readonly TaskEvent[]): string[] {
  return events.flatMap((e) =>
    e.type === 'toolset_change' &&
    (e.data.primed === true || e.data.all_loaded === true) &&
    e.data.action === 'ACTIVATE'
      ? e.data.toolset_ids
      : [],
  );
}
