import type { PendingApproval } from '../contract.ts';
import type { LoopSnapshot } from '../loop/loop.ts';
import type { ApprovalDecision } from '../loop/tool-step.ts';
import { waitingMessage } from '../webhooks/message.ts';
import { gatewayDecision, type HumanDecision, storedDecision } from './approval-wait.ts';
import { AgentShutdown, ResumedElsewhere } from './outcome.ts';
import type { TaskRun } from './worker.ts';

// A task's pause for a human: on record with the loop's state (any worker may go on once it is decided), no
// slot taken while it waits, and claimed back to go on here, unless another worker went on with it first.

/** Pauses on record, waits for the human, and says what was decided. */
export async function decide(
  t: TaskRun,
  pending: PendingApproval,
  snapshot?: LoopSnapshot,
): Promise<ApprovalDecision> {
  const { w, taskId, controller } = t;
  if (snapshot) await pauseOnRecord(t, pending, snapshot);
  w.paused.add(taskId);
  // A paused task takes no slot: a queued one may start.
  w.drain();
  try {
    const decision = await waitForHuman(t, pending);
    if (!(await claimPaused(t))) throw controller.signal.reason;
    t.emit('approval_decided', {
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
}

/** The pause, stored with the loop's state and its event. */
async function pauseOnRecord(t: TaskRun, pending: PendingApproval, snapshot: LoopSnapshot): Promise<void> {
  const { w, taskId, traced } = t;
  // Logged in the call's span (its trace ids on the line); the event then ends that attempt's trace.
  w.deps.log.info(
    { task: taskId, approval: pending.approval_id, subject: pending.subject },
    'task awaits approval',
  );
  // The event first: the pause commits it with the paused state.
  t.emit('approval_needed', { ...pending });
  await w.deps.store.pause(
    taskId,
    pending,
    traced ? { ...snapshot, trace: traced.stored() } : snapshot,
    snapshot.steps,
    waitingMessage(t.task, pending, snapshot.steps),
  );
}

/** The human's decision: the gateway's approval, or (a call of unknown outcome) the one stored with the task. */
async function waitForHuman(t: TaskRun, pending: PendingApproval): Promise<HumanDecision> {
  const { w, taskId, controller } = t;
  const source =
    pending.kind === 'unknown_outcome'
      ? storedDecision(w.deps.store, taskId, pending.call_id)
      : gatewayDecision(t.gateway, pending);
  try {
    return await w.waiter.wait(taskId, source, pending, controller.signal);
  } catch (err) {
    // Stopped while paused (its time limit, a cancel): only the worker that claims the task records its
    // end; another worker resumed it meanwhile: it goes on there. Stopping the process leaves it w.paused.
    if (err instanceof ResumedElsewhere) {
      w.movedOn.add(taskId);
      controller.abort(err);
    } else if (!(controller.signal.reason instanceof AgentShutdown)) await claimPaused(t);
    throw err;
  }
}

/** Claims the paused task to go on with it here; false (and the task is left) when another worker did. */
async function claimPaused(t: TaskRun): Promise<boolean> {
  const { w, taskId, controller } = t;
  if (await w.deps.store.unpause(taskId)) return true;
  w.movedOn.add(taskId);
  controller.abort(new ResumedElsewhere());
  return false;
}
