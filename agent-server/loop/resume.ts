import { answerCalls } from './answer.ts';
import { unknownOutcomeQuestion } from './lost-answer.ts';
import { type RecordedCall, recoverReply } from './recovery.ts';
import { endWith, type LoopOutcome, type LoopRun, type LoopSnapshot, snapshotAt } from './state.ts';
import type { ApprovalDecision } from './tool-step.ts';

// Going on from where a loop stopped: a pause for a human's decision, or another worker's claim (its last
// checkpoint and the calls it recorded since). Each answers the rest of the reply it stopped in, or ends the
// task; the loop then asks the model again.

/**
 * Going on from a pause, with the human's decision on the call that waited (none: a consent given, the call
 * is made again as if for the first time).
 */
export async function goOnFromPause(
  run: LoopRun,
  pending: LoopSnapshot['pending'],
  decision: ApprovalDecision | undefined,
): Promise<LoopOutcome | undefined> {
  if (decision?.fail) return endWith(run.state, 'failed', null, decision.fail);
  await answerCalls(run, pending.calls, pending.step, pending.tools, {
    index: pending.index,
    done: pending.done,
    decision,
  });
  return undefined;
}

/**
 * Going on from another worker's claim: its calls that finished are answered from their records, and a call
 * that started and never finished runs again only if it is safe to (otherwise a human decides).
 */
export async function goOnFromTakeover(
  run: LoopRun,
  pending: LoopSnapshot['pending'] | undefined,
  recorded: RecordedCall[],
): Promise<LoopOutcome | undefined> {
  const { deps, state } = run;
  const worker = deps.worker ?? 'unknown';
  if (!pending) {
    deps.emit('task_resumed', { worker, step: null, calls_done: 0, unknown: null, rerun: false });
    return undefined;
  }
  const r = recoverReply(pending, recorded, state.exposure.mode !== 'native');
  for (const id of r.after?.used ?? []) state.used.add(id);
  for (const name of r.after?.shown ?? []) state.exposure.shown.add(name);
  deps.emit('task_resumed', {
    worker,
    step: pending.step,
    calls_done: r.index,
    unknown: r.unknown?.name ?? null,
    rerun: r.unknown?.safe ?? false,
  });
  let decision: ApprovalDecision | undefined;
  // Taken over mid-call: from now the gateway refuses what the previous holder sent and has not begun.
  if (r.unknown && deps.calls) {
    const fence = deps.calls.fence();
    if (fence !== undefined) await run.gateway.announceFence(deps.calls.taskId, fence, deps.signal);
  }
  if (r.unknown && !r.unknown.safe) {
    const call = pending.calls[r.index];
    const question = unknownOutcomeQuestion(call, r.unknown.name, 'worker_stopped');
    decision = deps.awaitApproval
      ? await deps.awaitApproval(
          { call, approval: question, index: r.index, done: r.done },
          snapshotAt(state, { ...pending, index: r.index, done: r.done }),
        )
      : { approved: false, fail: `Task failed: ${question.reason}` };
    if (decision.fail) return endWith(state, 'failed', null, decision.fail);
  }
  await answerCalls(run, pending.calls, pending.step, pending.tools, {
    index: r.index,
    done: r.done,
    decision,
  });
  return undefined;
}
