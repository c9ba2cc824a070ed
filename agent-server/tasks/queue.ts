import type { ExecuteTaskResponse, Task } from '../contract.ts';
import type { Claim, ClaimedTask, QueueChange, TaskStore } from '../store/interface.ts';
import { finishedMessage } from '../webhooks/message.ts';
import type { TaskListener } from './deps.ts';
import { noSteps } from './outcome.ts';
import type { TaskToRun, Worker } from './run.ts';

// The task queue of this process: tasks waiting for a slot, claimed in the store in one statement for every slot
// that frees (so on a shared database each runs on one agent-server), oldest first, whether queued here or
// elsewhere; the store tried again when another process says it queued some, and now and then. The runs
// themselves are run.ts.

/** How long a change to the queue heard from another process may wait for others to share one read. */
const QUEUE_WAKE_MS = 20;

/** A task waiting for a slot: who follows it, and its `done` for when it has run. */
export interface QueuedTask {
  task: TaskToRun;
  listeners: Set<TaskListener>;
  settle: (launched: Promise<ExecuteTaskResponse | undefined>) => void;
  done: Promise<ExecuteTaskResponse>;
  /** Taken up from the store (no request here waits for it): if another process claims it, it is dropped. */
  adopted: boolean;
}

/** What the queue needs besides the worker's shared state. */
export interface QueueContext {
  /** Tasks being claimed or recorded right now (each will take a slot, or a place in the queue). */
  slots: { claiming: number; enqueuing: number };
  /** Tasks taking a slot now. */
  active(): number;
  maxConcurrent: number;
  /** How often, with free slots, the store's queue is read. */
  pollMs: number;
  /** Runs a claimed task here. */
  launch(
    task: TaskToRun,
    opts: { listeners: Set<TaskListener>; claimed: Claim },
  ): { done: Promise<ExecuteTaskResponse> };
  /** A stored task as a worker runs it. */
  toRun(task: Task, request: unknown): TaskToRun;
  /** Waits here for the decision on a task stored as paused. */
  resumePaused(paused: Awaited<ReturnType<TaskStore['awaiting']>>[number]): void;
}

export type TaskQueue = ReturnType<typeof createTaskQueue>;

/** The queue's state, shared by the functions below. */
interface Queue {
  w: Worker;
  ctx: QueueContext;
  /** Tasks waiting here for a slot (a request waits for each), oldest first. */
  items: QueuedTask[];
  /** The store may hold queued tasks no one here waits for (another process's, or left by a stopped one). */
  storeHasMore: boolean;
  /** The claim being made, if one is: one at a time, for every free slot at once. */
  claiming?: Promise<void>;
  /** A drain was asked for while a claim was in flight: another claim follows it. */
  wanted: boolean;
  /** Tasks a client cancels before they started, taken out of `items` while the cancel claims them. */
  cancelling: Map<string, QueuedTask>;
  /** Shut down: nothing is claimed any more, and what a claim in flight brings goes back. */
  stopped: boolean;
  /** A sweep runs; `again`: another was asked for meanwhile. */
  sweeping: boolean;
  again: boolean;
  /** A sweep soon, for a burst of changes heard from other processes. */
  soon?: NodeJS.Timeout;
}

export function createTaskQueue(w: Worker, ctx: QueueContext) {
  const q: Queue = {
    w,
    ctx,
    items: [],
    storeHasMore: true,
    wanted: false,
    cancelling: new Map(),
    stopped: false,
    sweeping: false,
    again: false,
  };
  const poll = setInterval(() => look(q), ctx.pollMs);
  poll.unref();
  const stopHearing = w.deps.store.onQueueChange((change) => hear(q, change));
  return {
    /** The tasks waiting here, oldest first. */
    items: q.items,
    drain: () => drain(q),
    enqueue: (task: QueuedTask['task'], opts?: EnqueueOptions) => enqueue(q, task, opts),
    unwaited: (done: Promise<ExecuteTaskResponse>, taskId: string) => unwaited(w, done, taskId),
    look: () => look(q),
    /** Takes a task waiting here out of the queue for its cancel, once no claim is in flight (undefined: none). */
    withdraw: (taskId: string) => withdraw(q, taskId),
    /** After the cancel's claim found a withdrawn task taken: ended by a claim here (true), or elsewhere's. */
    settled: (taskId: string) => settled(q, taskId),
    /** A withdrawn task the cancel claimed: it ends cancelled with nothing run. */
    endCancelled(queued: QueuedTask): void {
      q.cancelling.delete(queued.task.taskId);
      queued.settle(endUnstarted(w, queued, 'cancelled', CANCELLED));
    },
    /** A withdrawn task the cancel could not claim (the database failing): it waits in the queue again. */
    restore(queued: QueuedTask): void {
      q.cancelling.delete(queued.task.taskId);
      q.items.unshift(queued);
    },
    /** Stops reading the store's queue and claiming (shutdown). */
    stop(): void {
      q.stopped = true;
      clearInterval(poll);
      clearTimeout(q.soon);
      stopHearing();
    },
  };
}

/** Runs a claimed task here: the request waiting for it is told its end, or no one is (taken up). */
function run(q: Queue, { task, claim }: ClaimedTask): void {
  // Cancelled by a client while this claim was in flight: ended here, nothing run.
  const cancelled = q.cancelling.get(task.task_id);
  if (cancelled) {
    q.cancelling.delete(task.task_id);
    cancelled.settle(endUnstarted(q.w, cancelled, 'cancelled', CANCELLED));
    return;
  }
  const at = q.items.findIndex((i) => i.task.taskId === task.task_id);
  if (at !== -1) {
    const [mine] = q.items.splice(at, 1);
    mine.settle(q.ctx.launch(mine.task, { listeners: mine.listeners, claimed: claim }).done);
    return;
  }
  const done = q.ctx.launch(q.ctx.toRun(task, claim.request), { listeners: new Set(), claimed: claim }).done;
  unwaited(q.w, done, task.task_id);
}

/** Tasks queued here that another process claimed (or that ended unstarted): followed in the store. */
function goneElsewhere(q: Queue, taskIds: Iterable<string>): void {
  for (const id of taskIds) {
    const at = q.items.findIndex((i) => i.task.taskId === id);
    if (at === -1) continue;
    const [gone] = q.items.splice(at, 1);
    gone.settle(gone.adopted ? Promise.resolve(undefined) : q.w.ranElsewhere(id, gone.listeners));
  }
}

/** A claimed task there is no slot for after all (a request took it meanwhile): back to the queue. */
function giveBack(q: Queue, { task }: ClaimedTask): void {
  q.w.deps.store
    .release(task.task_id)
    .catch((err: unknown) =>
      q.w.deps.log.warn(
        { err, task: task.task_id },
        'a claimed task could not be given back; its lease lapses',
      ),
    );
  q.storeHasMore = true;
}

/**
 * Claims as many queued tasks as there are free slots, oldest first, in one statement (so when several
 * agent-servers share one database each task runs on one of them), and runs them. Tasks queued here that the
 * store no longer offers went to another process; they are followed in the store until they end. The slots
 * are not held while the claim is made: a request meanwhile starts its task at once, and a claimed task left
 * without a slot goes back to the queue.
 */
function drain(q: Queue): void {
  const { w, ctx } = q;
  const free = ctx.maxConcurrent - ctx.active();
  if (q.claiming) q.wanted = true;
  if (q.stopped || q.claiming || free <= 0 || !w.deps.model) return;
  if (q.items.length === 0 && !q.storeHasMore) return;
  q.wanted = false;
  const before = q.items.map((i) => i.task.taskId);
  // Claimed as many as asked (the store may hold more), or asked again meanwhile: another claim follows.
  let again = false;
  // Not a task whose run still ends here (its lease lapsed meanwhile and another process requeued it).
  const claiming = w.deps.store
    .claimNext(free, [...w.running.keys()])
    .then(
      (claimed) => {
        again = claimed.length >= free;
        runClaimed(q, claimed, free, before);
      },
      (err: unknown) => {
        w.deps.log.error(
          { err },
          'queued tasks could not be claimed; the queue tries again at its next poll',
        );
      },
    )
    .finally(() => {
      q.claiming = undefined;
      if (again || q.wanted) drain(q);
    })
    // Following one threw (a bug): said, and the queue goes on.
    .catch((err: unknown) => w.deps.log.error({ err }, 'a claimed task could not be started'));
  q.claiming = claiming;
}

/** What one claim brought: each runs while there is a slot; fewer than asked means the store has no more. */
function runClaimed(q: Queue, claimed: ClaimedTask[], asked: number, before: string[]): void {
  const back = new Set<string>();
  for (const c of claimed) {
    if (!q.stopped && q.ctx.active() < q.ctx.maxConcurrent) {
      try {
        run(q, c);
        continue;
      } catch (err) {
        // Starting it threw (a bug): said, and it goes back rather than holding its lease for ever.
        q.w.deps.log.error({ err, task: c.task.task_id }, 'a claimed task could not be started');
      }
    }
    back.add(c.task.task_id);
    giveBack(q, c);
  }
  if (claimed.length >= asked) return;
  // None is left to claim, so one queued here before is another's now; but a thread's turn waits for the one
  // before it, which the store then holds queued still (one read says).
  q.storeHasMore = false;
  const left = q.items.filter((i) => before.includes(i.task.taskId) && !back.has(i.task.taskId));
  goneElsewhere(
    q,
    left.filter((i) => i.task.threadId === null).map((i) => i.task.taskId),
  );
  if (left.some((i) => i.task.threadId !== null))
    reconcile(q).catch((err: unknown) => q.w.deps.log.warn({ err }, 'could not read the task queue'));
}

/**
 * The `done` of a task no request waits for (taken up from the store): a task that could not record its end
 * was logged where it ran (run.ts), so its rejection here is only noted.
 */
function unwaited(w: Worker, done: Promise<ExecuteTaskResponse>, taskId: string): void {
  done.catch((err: unknown) =>
    w.deps.log.debug({ err, task: taskId }, 'a task nobody waited for ended with an error'),
  );
}

interface EnqueueOptions {
  listener?: TaskListener;
  adopted?: boolean;
}

/** Queues a recorded task; its `done` settles once it has run. */
function enqueue(
  q: Queue,
  task: QueuedTask['task'],
  opts: EnqueueOptions = {},
): Promise<ExecuteTaskResponse> {
  // Claimed here already, between its record and this (a claim for free slots takes every queued task).
  const running = q.w.running.get(task.taskId);
  if (running) {
    if (opts.listener) running.listeners.add(opts.listener);
    return running.done;
  }
  let settle: QueuedTask['settle'] = () => {};
  const done = new Promise<ExecuteTaskResponse>((resolve, reject) => {
    settle = (launched) => launched.then((r) => resolve(r as ExecuteTaskResponse), reject);
  });
  const listeners = new Set(opts.listener ? [opts.listener] : []);
  q.items.push({ task, listeners, settle, done, adopted: opts.adopted ?? false });
  if (!opts.adopted) q.w.deps.log.info({ task: task.taskId, queued: q.items.length }, 'task queued');
  return done;
}

/**
 * Now and then: tasks whose worker stopped renewing their lease go back to the queue, paused tasks no one here
 * waits for are waited for, and free slots claim what the store holds.
 */
async function sweep(q: Queue): Promise<void> {
  const { store, log } = q.w.deps;
  const lapsed = await store.requeueLapsed();
  if (lapsed.length > 0) log.warn({ tasks: lapsed }, 'requeued tasks whose lease lapsed');
  // An embedded store has no other worker: its paused tasks all have their wait here since the start.
  if (!store.embedded) for (const t of await store.awaiting()) q.ctx.resumePaused(t);
  // With no slot free here (or none at all: AGENT_ROLE=api), no claim of this process finds out which of the
  // tasks waiting here another process took, should its notification have been missed or too long to name them.
  if (q.items.length > 0 && q.ctx.active() >= q.ctx.maxConcurrent) await reconcile(q);
  q.storeHasMore = true;
  drain(q);
}

/** Tasks waiting here that the store no longer holds queued went to another process (one read). */
async function reconcile(q: Queue): Promise<void> {
  const before = q.items.map((i) => i.task.taskId);
  const queued = new Set((await q.w.deps.store.queued()).map((t) => t.task.task_id));
  goneElsewhere(
    q,
    before.filter((id) => !queued.has(id)),
  );
}

/** A sweep now; never two at a time (one asked for meanwhile runs after). */
function look(q: Queue): void {
  // A process with every slot taken and no task waiting here has nothing to take up: the sweep is for others.
  if (!q.w.deps.model || (q.items.length === 0 && q.ctx.active() >= q.ctx.maxConcurrent)) return;
  if (q.sweeping) {
    q.again = true;
    return;
  }
  q.sweeping = true;
  sweep(q)
    .catch((err: unknown) => q.w.deps.log.warn({ err }, 'could not read the task queue'))
    .finally(() => {
      q.sweeping = false;
      if (q.again) {
        q.again = false;
        look(q);
      }
    });
}

/** A change to the queue another process made. */
function hear(q: Queue, change: QueueChange): void {
  if (change.kind === 'claimed') {
    // Requests here waiting for one of these follow it there. Too many to name: the store says which.
    if (change.taskIds !== '*') goneElsewhere(q, change.taskIds);
    else if (q.items.length > 0)
      reconcile(q).catch((err: unknown) => q.w.deps.log.warn({ err }, 'could not read the task queue'));
    return;
  }
  if (change.kind === 'queued') {
    q.storeHasMore = true;
    drain(q);
    return;
  }
  // A decision made elsewhere, or a wake-up: paused tasks ask again, and the queue is swept. A burst of them
  // is one sweep a few milliseconds later.
  q.soon ??= setTimeout(() => {
    q.soon = undefined;
    q.w.waiter.pokeAll();
    look(q);
  }, QUEUE_WAKE_MS);
}

/** Why a task cancelled before it started ended. */
const CANCELLED = 'The task was cancelled by a client before it started';

/**
 * Takes task `taskId` out of the queue for its cancel once no claim is in flight (one that took it runs it,
 * and the cancel stops it running). Until the cancel is settled, a claim of this process that takes it ends it.
 */
async function withdraw(q: Queue, taskId: string): Promise<QueuedTask | undefined> {
  while (q.claiming) await q.claiming;
  const at = q.items.findIndex((i) => i.task.taskId === taskId);
  if (at === -1) return undefined;
  const [queued] = q.items.splice(at, 1);
  q.cancelling.set(taskId, queued);
  return queued;
}

/**
 * After the cancel's own claim of a withdrawn task found it taken: true when a claim of this process took
 * and ended it; false when another process did (the task is followed there).
 */
async function settled(q: Queue, taskId: string): Promise<boolean> {
  while (q.claiming) await q.claiming;
  const queued = q.cancelling.get(taskId);
  if (!queued) return true;
  q.cancelling.delete(taskId);
  return false;
}

/** Ends a queued task that never started, recording why (and telling its followers). */
async function endUnstarted(
  w: Worker,
  queued: QueuedTask,
  status: 'cancelled',
  why: string,
): Promise<ExecuteTaskResponse> {
  const { taskId, sessionId } = queued.task;
  const outcome = noSteps(status, why, w.tokens.name);
  const { final_answer: _none, ...data } = outcome;
  const event = w.deps.store.appendEvent(taskId, 'task_finished', 0, data);
  for (const l of queued.listeners) l.event(event);
  await w.deps.store.finishTask(taskId, outcome, finishedMessage(queued.task, outcome));
  const result: ExecuteTaskResponse = {
    ...outcome,
    task_id: taskId,
    session_id: sessionId,
    thread_id: queued.task.threadId,
    duration_ms: 0,
    error: why,
  };
  for (const l of queued.listeners) l.end?.(result);
  return result;
}
