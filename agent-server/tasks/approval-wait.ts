import type { GatewayClient } from '../clients/gateway.ts';
import type { PendingApproval } from '../contract.ts';
import { type ApprovalDecision, throwIfStopped } from '../loop/tool-step.ts';

// A paused task waiting for its approval: it asks the gateway (the one record of the decision, whoever made
// it: a user through this agent-server, the operator at the gateway) until it is decided, expires, or the
// task is stopped; a decision made here wakes the wait at once.

/** Waits for approvals; `pollMs` is how often a waiting task asks the gateway. */
export function createApprovalWaiter(pollMs: number) {
  /** Wakes a paused task's wait at once (its approval was just decided here). */
  const pokes = new Map<string, () => void>();
  return {
    poke: (taskId: string) => pokes.get(taskId)?.(),
    /** The decision on `pending`, as the model will be told it. */
    async wait(
      taskId: string,
      gateway: GatewayClient,
      pending: PendingApproval,
      signal: AbortSignal,
    ): Promise<ApprovalDecision> {
      const deadline = Date.parse(pending.expires_at);
      for (;;) {
        throwIfStopped(signal);
        const approval = await gateway.getApproval(pending.approval_id, signal).catch(() => undefined);
        throwIfStopped(signal);
        if (approval?.status === 'approved') return { approved: true };
        if (approval?.status === 'denied') {
          const why = approval.decision_reason ? `: ${approval.decision_reason}` : '';
          return {
            approved: false,
            message: `a human denied it (${approval.decided_by ?? 'unknown'})${why}`,
          };
        }
        if (approval?.status === 'expired' || approval?.status === 'used' || Date.now() >= deadline) {
          return {
            approved: false,
            message: `no human approved it before ${pending.expires_at}; the operator's policy requires approval (${pending.reason})`,
          };
        }
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
