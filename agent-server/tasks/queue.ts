import type { ExecuteTaskResponse, Task } from '../contract.ts';
import type { Claim, TaskStore } from '../store/interface.ts';
import type { TaskListener } from './deps.ts';
import { noSteps } from './outcome.ts';
import type { TaskToRun, Worker } from './run.ts';

// The task queue of this process: tasks waiting for a slot, claimed in the store when one frees (so on a shared
// database each runs on one agent-server), the store's queue read now and then and at once when another process
// says it changed, and tasks queued elsewhere taken up with free slots. The runs themselves are run.ts.

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
  /** Tasks waiting for a slot, oldest first; they start as running ones end or pause. */
  const queue: QueuedTask[] = [];
  /** A claim just failed: the queue waits for its next poll rather than trying again at once. */
  let failedClaim = false;

  /**
   * Starts queued tasks while there are free slots. Each is claimed in the store first (queued → running, only
   * if it is still queued), so when several agent-servers share one database a task runs on one of them; one
   * claimed elsewhere is followed in the store until it ends.
   */
  function drain(): void {
    while (queue.length > 0 && ctx.active() < ctx.maxConcurrent && w.deps.model) {
      const next = queue.shift() as QueuedTask;
      slots.claiming++;
      w.deps.store
        .claim(next.task.taskId)
        .then(
          (claimed) => {
            if (claimed) next.settle(ctx.launch(next.task, { listeners: next.listeners, claimed }).done);
            else
              next.settle(
                next.adopted ? Promise.resolve(undefined) : w.ranElsewhere(next.task.taskId, next.listeners),
              );
          },
          (err: unknown) => {
            w.deps.log.error({ err, task: next.task.taskId }, 'a queued task could not be started');
            queue.unshift(next);
            failedClaim = true;
          },
        )
        .finally(() => {
          slots.claiming--;
          // After a failed claim (the database refusing), the next try waits for the queue's poll.
          if (failedClaim) failedClaim = false;
          else drain();
        })
        // Starting or following it threw (a bug): said, and the queue goes on.
        .catch((err: unknown) =>
          w.deps.log.error({ err, task: next.task.taskId }, 'a claimed task could not be started'),
        );
    }
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
   * Reconciles the local queue with the store's: a task queued here that is no longer queued there was claimed
   * (or cancelled) by another process and is followed in the store; with free slots, queued tasks no one here
   * holds (left by a stopped process, or another's) are taken up. Returns how many were taken up.
   */
  async function syncQueue(): Promise<number> {
    // The sweeper: tasks whose worker stopped renewing their lease go back to the queue.
    const lapsed = await w.deps.store.requeueLapsed();
    if (lapsed.length > 0) w.deps.log.warn({ tasks: lapsed }, 'requeued tasks whose lease lapsed');
    // Paused tasks no one here waits for (their worker stopped): this worker waits for their decision too. An
    // embedded store has no other worker: its paused tasks all have their wait here since the start.
    if (!w.deps.store.embedded) for (const t of await w.deps.store.awaiting()) ctx.resumePaused(t);
    // Only tasks queued here before the read are judged by it (one queued meanwhile may be missing from it).
    const before = new Set(queue.map((q) => q.task.taskId));
    const waiting = await w.deps.store.queued();
    const stillQueued = new Set(waiting.map((q) => q.task.task_id));
    for (let i = queue.length - 1; i >= 0; i--) {
      const q = queue[i];
      if (stillQueued.has(q.task.taskId) || !before.has(q.task.taskId)) continue;
      queue.splice(i, 1);
      q.settle(q.adopted ? Promise.resolve(undefined) : w.ranElsewhere(q.task.taskId, q.listeners));
    }
    let adopted = 0;
    for (const { task, request } of waiting) {
      if (ctx.active() + adopted >= ctx.maxConcurrent) break;
      if (queue.some((q) => q.task.taskId === task.task_id) || w.running.has(task.task_id)) continue;
      unwaited(enqueue(ctx.toRun(task, request), { adopted: true }), task.task_id);
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
    if (!w.deps.model || (queue.length === 0 && ctx.active() >= ctx.maxConcurrent)) return;
    if (looking) {
      again = true;
      return;
    }
    looking = true;
    syncQueue()
      .catch((err: unknown) => w.deps.log.warn({ err }, 'could not read the task queue'))
      .finally(() => {
        looking = false;
        if (again) {
          again = false;
          look();
        }
      });
  };
  const poll = setInterval(look, ctx.pollMs);
  poll.unref();
  let soon: NodeJS.Timeout | undefined;
  const stopHearing = w.deps.store.onQueueChange(() => {
    // A task queued, requeued or claimed, or a decision made elsewhere: paused tasks ask again, free slots
    // claim. A burst of changes (a thousand claims) is one read a few milliseconds later, not a thousand.
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
