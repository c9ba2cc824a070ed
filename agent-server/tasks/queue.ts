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

  /** A claim in flight (never two at a time), and whether another was asked for meanwhile. */
  let claiming = false;
  let claimAgain = false;

  /**
   * Claims as many queued tasks as there are free slots, oldest first, in one statement (store.claimNext), and
   * starts them: one queued here with its followers, one queued elsewhere (another process's, or one a stopped
   * process left) taken up. So when several agent-servers share one database a task runs on one of them. With
   * `anyway`, the store is asked even with nothing queued here (its queue changed, or the poll).
   */
  function drain(anyway = false): void {
    if (!w.deps.model || (queue.length === 0 && !anyway)) return;
    if (claiming) {
      claimAgain = true;
      return;
    }
    const free = ctx.maxConcurrent - ctx.active();
    if (free <= 0) return;
    // Tasks queued here before the claim: if the store has fewer queued than the free slots, those it did not
    // hand over are queued no longer (claimed by another process, or ended) and are followed in the store.
    const before = new Set(queue.map((q) => q.task.taskId));
    claiming = true;
    slots.claiming += free;
    let failed = false;
    w.deps.store
      .claimNext(free)
      .then(
        (claims) => {
          slots.claiming -= free;
          for (const { task, claim } of claims) start(task, claim);
          if (claims.length < free) settleElsewhere((id) => before.has(id));
        },
        (err: unknown) => {
          slots.claiming -= free;
          failed = true;
          w.deps.log.error({ err }, 'queued tasks could not be claimed');
        },
      )
      .finally(() => {
        claiming = false;
        // After a failed claim (the database refusing), the next try waits for the queue's poll.
        const again = claimAgain || queue.some((q) => !before.has(q.task.taskId));
        claimAgain = false;
        if (again && !failed) drain(true);
      })
      // Starting or following a task threw (a bug): said, and the queue goes on.
      .catch((err: unknown) => w.deps.log.error({ err }, 'a claimed task could not be started'));
  }

  /** Runs a task claimed here: the one queued here with its followers, or one taken up from the store. */
  function start(task: Task, claim: Claim): void {
    const at = queue.findIndex((q) => q.task.taskId === task.task_id);
    if (at === -1) {
      const { done } = ctx.launch(ctx.toRun(task, claim.request), { listeners: new Set(), claimed: claim });
      unwaited(done, task.task_id);
      return;
    }
    const [next] = queue.splice(at, 1);
    next.settle(ctx.launch(next.task, { listeners: next.listeners, claimed: claim }).done);
  }

  /** Tasks queued here that `gone` says went elsewhere: they leave the queue and are followed in the store. */
  function settleElsewhere(gone: (taskId: string) => boolean): void {
    for (let i = queue.length - 1; i >= 0; i--) {
      const q = queue[i];
      if (!gone(q.task.taskId)) continue;
      queue.splice(i, 1);
      q.settle(q.adopted ? Promise.resolve(undefined) : w.ranElsewhere(q.task.taskId, q.listeners));
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
    // Claimed from the store here between its recording and this call (it runs already): followed there.
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
   * The poll, and what a change heard from another process asks for: tasks whose worker stopped go back to the
   * queue, paused tasks no one here waits for are waited for here too, and free slots claim queued tasks.
   */
  async function syncQueue(): Promise<void> {
    // The sweeper: tasks whose worker stopped renewing their lease go back to the queue.
    const lapsed = await w.deps.store.requeueLapsed();
    if (lapsed.length > 0) w.deps.log.warn({ tasks: lapsed }, 'requeued tasks whose lease lapsed');
    // Paused tasks no one here waits for (their worker stopped): this worker waits for their decision too. An
    // embedded store has no other worker: its paused tasks all have their wait here since the start.
    if (!w.deps.store.embedded) for (const t of await w.deps.store.awaiting()) ctx.resumePaused(t);
    drain(true);
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
  /** Tasks another process claimed, heard and not yet dropped from the queue here (`*`: any of them). */
  const claimedElsewhere = new Set<string>();
  let anyClaimed = false;
  /** What the changes heard ask for: free slots claim (`claim`), everything is looked at again (`all`). */
  let asked = { claim: false, all: false };
  const stopHearing = w.deps.store.onQueueChange((change) => {
    // A task queued or requeued: free slots claim. Tasks claimed elsewhere: dropped here by id, nothing read. A
    // decision made (or anything else): paused tasks ask again, and the queue is looked at. A burst of changes
    // (a thousand claims) is one of each a few milliseconds later, not a thousand.
    if (change.kind === 'queued') asked.claim = true;
    else if (change.kind === 'any') asked.all = true;
    else if (change.taskIds === '*') anyClaimed = true;
    else for (const id of change.taskIds) claimedElsewhere.add(id);
    soon ??= setTimeout(() => {
      soon = undefined;
      const { claim, all } = asked;
      asked = { claim: false, all: false };
      if (anyClaimed || claimedElsewhere.size > 0) {
        // With `*`, the tasks queued here are judged by the next claim (those it does not hand over went).
        if (anyClaimed) drain(true);
        else settleElsewhere((id) => claimedElsewhere.has(id));
        anyClaimed = false;
        claimedElsewhere.clear();
      }
      if (all) {
        w.waiter.pokeAll();
        look();
      } else if (claim) drain(true);
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
