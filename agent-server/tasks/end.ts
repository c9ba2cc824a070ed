import type { ExecuteTaskResponse, Task } from '../contract.ts';
import type { LoopOutcome } from '../loop/loop.ts';
import { LeaseLost } from '../store/interface.ts';
import { finishedMessage } from '../webhooks/message.ts';
import { AgentShutdown, ResumedElsewhere, resultOf } from './outcome.ts';
import type { TaskRun } from './worker.ts';

// How a task's run here ends: its end recorded and told; or, when another worker goes on with it, followed
// there; or, when this process stops, the task handed back to the queue (a paused one stays paused).

/** Ends the task's run with the loop's outcome, and says what its waiters get. */
export async function endTask(
  t: TaskRun,
  outcome: LoopOutcome,
  durationMs: number,
): Promise<ExecuteTaskResponse> {
  const { w, taskId, controller, listeners } = t;
  if (w.movedOn.has(taskId) || controller.signal.reason instanceof ResumedElsewhere) return goneElsewhere(t);
  if (controller.signal.reason instanceof AgentShutdown)
    return stoppedByShutdown(t, controller.signal.reason);
  await recordEnd(t, outcome, durationMs);
  // The lease was lost as the task ended: the worker that holds it now records its end.
  if (w.movedOn.has(taskId)) return goneElsewhere(t);
  const result: ExecuteTaskResponse = {
    status: outcome.status,
    final_answer: outcome.final_answer,
    task_id: taskId,
    session_id: t.task.sessionId,
    thread_id: t.task.threadId,
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
}

/** The task's last event and its end, on record together. */
async function recordEnd(t: TaskRun, outcome: LoopOutcome, durationMs: number): Promise<void> {
  const { w, taskId } = t;
  // Its webhook POST commits with the end (store/webhooks.ts).
  const webhook = finishedMessage(t.task, outcome);
  try {
    t.emit(
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
    await w.deps.store.finishTask(taskId, outcome, webhook).catch(async (err: unknown) => {
      if (err instanceof LeaseLost || w.movedOn.has(taskId)) return;
      // Not recorded (the database failing): the lease is let go, so once it lapses the task is requeued
      // and goes on from its checkpoint; whoever waits here is told.
      w.running.delete(taskId);
      await w.deps.store.release(taskId).catch(() => {});
      throw err;
    });
  }
}

/** The task goes on in another worker: its end is read from the store once it is there. */
async function goneElsewhere(t: TaskRun): Promise<ExecuteTaskResponse> {
  const { w, taskId, listeners } = t;
  // Whatever of its trace is still open ends here; the worker going on starts an attempt linked to it.
  t.traced?.release('elsewhere');
  w.running.delete(taskId);
  w.movedOn.delete(taskId);
  await w.deps.store.release(taskId).catch(() => {});
  w.deps.log.info({ task: taskId }, 'task goes on in another agent-server');
  const result = await w.ranElsewhere(taskId, listeners);
  listeners.clear();
  return result;
}

/** The process is stopping: the task's end is whatever the store holds, with the reason it stopped. */
async function stoppedByShutdown(t: TaskRun, reason: AgentShutdown): Promise<ExecuteTaskResponse> {
  const { w, taskId } = t;
  t.traced?.release('shutdown');
  // A running task goes back to the queue (another worker, or the next start, goes on from its checkpoint); a
  // paused one stays w.paused.
  if (!w.paused.has(taskId))
    await w.deps.store
      .release(taskId)
      .catch((err: unknown) => w.deps.log.warn({ err, task: taskId }, 'could not requeue a task'));
  w.running.delete(taskId);
  t.listeners.clear();
  return { ...resultOf((await w.deps.store.getTask(taskId)) as Task), error: reason.message };
}
