import type { GatewayClient } from '../clients/gateway.ts';
import type { PendingApproval } from '../contract.ts';
import { type ApprovalDecision, throwIfStopped } from '../loop/tool-step.ts';
import type { TaskStore } from '../store/interface.ts';
import { ResumedElsewhere } from './outcome.ts';

// A paused task waiting for its decision: it asks where the decision is recorded until it is decided, expires,
// or the task is stopped; a decision made here wakes the wait at once. A gateway approval is recorded at the
// gateway (whoever made it: a user through an agent-server, the operator at the gateway); a decision about a
// call of unknown outcome is the agent-server's own, in the task store every agent-server shares.

/** A decision, with who made it, when and why as it was recorded (the task's approval_decided event says so). */
export interface HumanDecision extends ApprovalDecision {
  /** Who decided: the role of the credential that did (none: nobody did, the request expired). */
  decided_by?: string;
  decided_at?: string;
  /** The reason the human gave, if any. */
  reason?: string;
}

/** Asks once for the decision on `pending` (undefined: not decided yet). */
export type DecisionSource = (signal: AbortSignal) => Promise<HumanDecision | undefined>;

/** Who decided and why, as recorded, without the fields that are not there. */
export function decisionBy(
  by: string | null | undefined,
  at: string | null | undefined,
  reason?: string | null,
) {
  return {
    ...(by ? { decided_by: by } : {}),
    ...(at ? { decided_at: at } : {}),
    ...(reason ? { reason } : {}),
  };
}

/** The decision on a gateway approval, as the model will be told it. */
export function gatewayDecision(gateway: GatewayClient, pending: PendingApproval): DecisionSource {
  return async (signal) => {
    const approval = await gateway.getApproval(pending.approval_id, signal).catch(() => undefined);
    const by = () => decisionBy(approval?.decided_by, approval?.decided_at, approval?.decision_reason);
    if (approval?.status === 'approved') return { approved: true, ...by() };
    if (approval?.status === 'denied') {
      const why = approval.decision_reason ? `: ${approval.decision_reason}` : '';
      const who = approval.decided_by ? `, decided by ${approval.decided_by}` : '';
      return { approved: false, message: `a human denied it${who}${why}`, ...by() };
    }
    if (approval?.status === 'expired' || approval?.status === 'used') return expired(pending);
    return undefined;
  };
}

/**
 * The decision on a call of unknown outcome, recorded in the task store; throws ResumedElsewhere once the task
 * no longer waits for it (another worker took the decision and went on).
 */
export function storedDecision(store: TaskStore, taskId: string, callId: string): DecisionSource {
  return async () => {
    const paused = (await store.awaiting()).find((t) => t.task.task_id === taskId);
    if ((paused?.pending as { call_id?: string } | null)?.call_id !== callId) throw new ResumedElsewhere();
    return (paused?.decision as HumanDecision | null) ?? undefined;
  };
}

const expired = (pending: PendingApproval): HumanDecision => ({
  approved: false,
  message: `no human approved it before ${pending.expires_at}; the operator's policy requires approval (${pending.reason})`,
});

/** Waits for approvals; `pollMs` is how often a waiting task asks. */
/** Paused tasks' waits for their decisions, woken at once when one is decided. */
export type ApprovalWaiter = ReturnType<typeof createApprovalWaiter>;

export function createApprovalWaiter(pollMs: number) {
  /** Wakes a paused task's wait at once (its approval was just decided here). */
  const pokes = new Map<string, () => void>();
  return {
    poke: (taskId: string) => pokes.get(taskId)?.(),
    /** Wakes every wait (a decision may have been made in another process). */
    pokeAll: () => {
      for (const poke of [...pokes.values()]) poke();
    },
    /** The decision on `pending`, as the model will be told it. */
    async wait(
      taskId: string,
      source: DecisionSource,
      pending: PendingApproval,
      signal: AbortSignal,
    ): Promise<HumanDecision> {
      const deadline = Date.parse(pending.expires_at);
      for (;;) {
        throwIfStopped(signal);
        const decision = await source(signal);
        throwIfStopped(signal);
        if (decision) return decision;
        if (Date.now() >= deadline) return expired(pending);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.max(10, Math.min(pollMs, deadline - Date.now())));
          function done() {
            clearTimeout(timer);
            pokes.delete(taskId);
            signal.removeEventListener('abort', done);
            resolve();
          }
          pokes.set(taskId, done);
          signal.addEventListener('abort', done, { once: true });
        });
      }
    },
  };
}
