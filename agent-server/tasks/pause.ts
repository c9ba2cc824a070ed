import type { PendingApproval, PendingConsent } from '../contract.ts';
import type { LoopSnapshot } from '../loop/loop.ts';
import type { ApprovalDecision } from '../loop/tool-step.ts';
import { waitingMessage } from '../webhooks/message.ts';
import { gatewayDecision, storedDecision } from './approval-wait.ts';
import { AgentShutdown, ResumedElsewhere } from './outcome.ts';
import type { TaskRun } from './worker.ts';

// A task's pause for a human (a decision on a call, or its owner connecting their own account): on record with
// the loop's state (any worker may go on once it is settled), no slot taken while it waits, and claimed back to
// go on here, unless another worker went on with it first.

/** Pauses on record, waits for the human, and says what was decided. */
export async function decide(
  t: TaskRun,
  pending: PendingApproval,
  snapshot?: LoopSnapshot,
): Promise<ApprovalDecision> {
  const { w, taskId } = t;
  if (snapshot) {
    // Logged in the call's span (its trace ids on the line); the event then ends that attempt's trace.
    w.deps.log.info(
      { task: taskId, approval: pending.approval_id, subject: pending.subject },
      'task awaits approval',
    );
    // The event first: the pause commits it with the paused state.
    t.emit('approval_needed', { ...pending });
    await pauseOnRecord(t, pending, snapshot, 'awaiting_approval');
  }
  const source =
    pending.kind === 'unknown_outcome'
      ? storedDecision(w.deps.store, taskId, pending.call_id)
      : gatewayDecision(t.gateway, pending);
  const decision = await whilePaused(t, () => w.waiter.wait(taskId, source, pending, t.controller.signal));
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
}

/**
 * Pauses on record until the task's owner connects their own account for the toolset a call was refused for;
 * says to go on (the call is made again) or, past CONSENT_TIMEOUT_S, to fail.
 */
export async function awaitConsent(
  t: TaskRun,
  pending: PendingConsent,
  snapshot?: LoopSnapshot,
): Promise<ApprovalDecision> {
  const { w, taskId } = t;
  if (snapshot) {
    w.deps.log.info({ task: taskId, toolset: pending.toolset }, 'task awaits its owner’s consent');
    t.emit('consent_required', {
      step: pending.step,
      tool_call_id: pending.call_id,
      toolset: pending.toolset,
      connect_url: pending.connect_url,
    });
    await pauseOnRecord(t, pending, snapshot, 'awaiting_consent');
  }
  return whilePaused(t, () => w.consents.wait(pending, t.controller.signal));
}

/** The pause, stored with the loop's state and its event. */
async function pauseOnRecord(
  t: TaskRun,
  pending: PendingApproval | PendingConsent,
  snapshot: LoopSnapshot,
  status: 'awaiting_approval' | 'awaiting_consent',
): Promise<void> {
  const { w, taskId, traced } = t;
  await w.deps.store.pause(
    taskId,
    pending,
    traced ? { ...snapshot, trace: traced.stored() } : snapshot,
    snapshot.steps,
    waitingMessage(t.task, pending, snapshot.steps),
    status,
  );
}

/** Waits paused (no slot taken), then claims the task back to go on here. */
async function whilePaused<T>(t: TaskRun, wait: () => Promise<T>): Promise<T> {
  const { w, taskId, controller } = t;
  w.paused.add(taskId);
  // A paused task takes no slot: a queued one may start.
  w.drain();
  try {
    let settled: T;
    try {
      settled = await wait();
    } catch (err) {
      // Stopped while paused (its time limit, a cancel): only the worker that claims the task records its
      // end; another worker resumed it meanwhile: it goes on there. Stopping the process leaves it w.paused.
      if (err instanceof ResumedElsewhere) {
        w.movedOn.add(taskId);
        controller.abort(err);
      } else if (!(controller.signal.reason instanceof AgentShutdown)) await claimPaused(t);
      throw err;
    }
    if (!(await claimPaused(t))) throw controller.signal.reason;
    return settled;
  } finally {
    w.paused.delete(taskId);
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
