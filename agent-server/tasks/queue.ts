import type { ExecuteTaskResponse, Task } from '../contract.ts';
import type { Claim, ClaimedTask, TaskStore } from '../store/interface.ts';
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

export function createTaskQueue(w: Worker, ctx: QueueContext) {
  const { slots } = ctx;
  /** Tasks waiting here for a slot (a request waits for each), oldest first. */
  const queue: QueuedTask[] = [];
  /** The store may hold queued tasks no one here waits for (another process's, or left by a stopped one). */
  let storeHasMore = true;
  /** A claim is being made: one at a time, for every free slot at once. */
  let claiming = false;

  /** Runs a claimed task here: the request waiting for it is told its end, or no one is (taken up). */
  function run({ task, claim }: ClaimedTask): void {
    const at = queue.findIndex((q) => q.task.taskId === task.task_id);
    if (at !== -1) {
      const [mine] = queue.splice(at, 1);
      mine.settle(ctx.launch(mine.task, { listeners: mine.listeners, claimed: claim }).done);
      return;
    }
    const done = ctx.launch(ctx.toRun(task, claim.request), { listeners: new Set(), claimed: claim }).done;
    unwaited(done, task.task_id);
  }

  /** Tasks queued here that another process claimed (or that ended unstarted): followed in the store. */
  function goneElsewhere(taskIds: Iterable<string>): void {
    for (const id of taskIds) {
      const at = queue.findIndex((q) => q.task.taskId === id);
      if (at === -1) continue;
      const [q] = queue.splice(at, 1);
      q.settle(q.adopted ? Promise.resolve(undefined) : w.ranElsewhere(id, q.listeners));
    }
  }

  /** A claimed task there is no slot for after all (a request took it meanwhile): back to the queue. */
  function giveBack({ task }: ClaimedTask): void {
    w.deps.store
      .release(task.task_id)
      .catch((err: unknown) =>
        w.deps.log.warn(
          { err, task: task.task_id },
          'a claimed task could not be given back; its lease lapses',
        ),
      );
    storeHasMore = true;
  }

  /**
   * Claims as many queued tasks as there are free slots, oldest first, in one statement (so when several
   * agent-servers share one database each task runs on one of them), and runs them. Tasks queued here that the
   * store no longer offers went to another process; they are followed in the store until they end. The slots
   * are not held while the claim is made: a request meanwhile starts its task at once, and a claimed task left
   * without a slot goes back to the queue.
   */
  function drain(): void {
    const free = ctx.maxConcurrent - ctx.active();
    if (claiming || free <= 0 || !w.deps.model || (queue.length === 0 && !storeHasMore)) return;
    claiming = true;
    const before = queue.map((q) => q.task.taskId);
    let failed = false;
    w.deps.store
      .claimNext(free)
      .then(
        (claimed) => {
          const back = new Set<string>();
          for (const c of claimed) {
            if (ctx.active() < ctx.maxConcurrent) run(c);
            else {
              back.add(c.task.task_id);
              giveBack(c);
            }
          }
          if (claimed.length < free) {
            // Fewer than asked: none is left to claim, so one queued here before is another's now.
            storeHasMore = false;
            goneElsewhere(before.filter((id) => !back.has(id) && queue.some((q) => q.task.taskId === id)));
          }
        },
        (err: unknown) => {
          failed = true;
          w.deps.log.error(
            { err },
            'queued tasks could not be claimed; the queue tries again at its next poll',
          );
        },
      )
      .finally(() => {
        claiming = false;
        if (!failed) drain();
      })
      // Starting or following one threw (a bug): said, and the queue goes on.
      .catch((err: unknown) => w.deps.log.error({ err }, 'a claimed task could not be started'));
  }

  /**
   * The `done` of a task no request waits for (taken up from the store): a task that could not record its end
   * was logged where it ran (run.ts), so its rejection here is only noted.
   */
  function unwaited(done: Promise<ExecuteTaskResponse>, taskId: string): void {
    done.catch((err: unknown) =>
      w.deps.log.debug({ err, task: taskId }, 'a task nobody waited for ended with an error'),
    );
  }

  /** Queues a recorded task; its `done` settles once it has run. */
  function enqueue(
    task: QueuedTask['task'],
    opts: { listener?: TaskListener; adopted?: boolean } = {},
  ): Promise<ExecuteTaskResponse> {
    // Claimed here already, between its record and this (a claim for free slots takes every queued task).
    const running = w.running.get(task.taskId);
    if (running) {
      if (opts.listener) running.listeners.add(opts.listener);
      return running.done;
    }
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
    if (!opts.adopted) w.deps.log.info({ task: task.taskId, queued: queue.length }, 'task queued');
    return done;
  }

  /**
   * Now and then: tasks whose worker stopped renewing their lease go back to the queue, paused tasks no one
   * here waits for are waited for, and free slots claim what the store holds.
   */
  async function sweep(): Promise<void> {
    const lapsed = await w.deps.store.requeueLapsed();
    if (lapsed.length > 0) w.deps.log.warn({ tasks: lapsed }, 'requeued tasks whose lease lapsed');
    // An embedded store has no other worker: its paused tasks all have their wait here since the start.
    if (!w.deps.store.embedded) for (const t of await w.deps.store.awaiting()) ctx.resumePaused(t);
    storeHasMore = true;
    drain();
  }

  // Never two sweeps at a time (one asked for meanwhile runs after).
  let sweeping = false;
  let again = false;
  const look = () => {
    if (!w.deps.model) return;
    if (sweeping) {
      again = true;
      return;
    }
    sweeping = true;
    sweep()
      .catch((err: unknown) => w.deps.log.warn({ err }, 'could not read the task queue'))
      .finally(() => {
        sweeping = false;
        if (again) {
          again = false;
          look();
        }
      });
  };
  const poll = setInterval(look, ctx.pollMs);
  poll.unref();
  let soon: NodeJS.Timeout | undefined;
  const stopHearing = w.deps.store.onQueueChange((change) => {
    if (change.kind === 'claimed') {
      // Another process claimed these: requests here waiting for one follow it there. Too many to name: the
      // next claim here finds out which.
      if (change.taskIds === '*') storeHasMore = true;
      else goneElsewhere(change.taskIds);
      return;
    }
    if (change.kind === 'queued') {
      storeHasMore = true;
      drain();
      return;
    }
    // A decision made elsewhere, or a wake-up: paused tasks ask again, and the queue is swept. A burst of
    // them is one sweep a few milliseconds later.
    soon ??= setTimeout(() => {
      soon = undefined;
      w.waiter.pokeAll();
      look();
    }, QUEUE_WAKE_MS);
  });

  /** Ends a queued task that never started, recording why (and telling its followers). */
  async function endUnstarted(q: QueuedTask, status: 'cancelled', why: string): Promise<ExecuteTaskResponse> {
    const { taskId, sessionId } = q.task;
    const outcome = noSteps(status, why, w.tokens.name);
    const { final_answer: _none, ...data } = outcome;
    const event = w.deps.store.appendEvent(taskId, 'task_finished', 0, data);
    for (const l of q.listeners) l.event(event);
    await w.deps.store.finishTask(taskId, outcome);
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

  return {
    /** The tasks waiting here, oldest first. */
    items: queue,
    drain,
    enqueue,
    unwaited,
    look,
    endUnstarted,
    /** Stops reading the store's queue (shutdown). */
    stop(): void {
      clearInterval(poll);
      clearTimeout(soon);
      stopHearing();
    },
  };
}
