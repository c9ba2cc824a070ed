import { HttpError } from '../../lib/http/http.ts';
import type { PendingApproval } from '../contract.ts';
import { type AgentCore, resumePaused } from './agent-core.ts';
import { relayDecision, unknownOutcomeDecision } from './relay.ts';

/** A human's answer: approve or not, why, and (a call of unknown outcome) whether the task is to fail. */
export interface DecisionBody {
  approve: boolean;
  reason?: string;
  fail?: boolean;
}

/**
 * A human's decision on what task `taskId` waits for: relayed to the gateway with the human's own
 * credential (`authorization`), then the task goes on — resumed from its stored state when this process
 * did not start it (a restart came between). `by` names the human's role, as the decision records it.
 */
export async function decideApproval(
  a: AgentCore,
  taskId: string,
  callId: string,
  body: DecisionBody,
  authorization: string | undefined,
  by: string,
): Promise<{
  task_id: string;
  call_id: string;
  status: string;
  decided_by: string | null;
  decided_at: string | null;
  reason: string | null;
}> {
  const paused = (await a.deps.store.awaiting()).find(
    (t) => t.task.task_id === taskId && t.task.status === 'awaiting_approval',
  );
  const pending = paused?.pending as PendingApproval | undefined;
  if (!pending || pending.call_id !== callId) {
    // Decided already (by another human, another tab): the first decision stands, and this one is told so.
    const decided = (await a.deps.store.events(taskId)).find(
      (e) => e.type === 'approval_decided' && e.data.call_id === callId,
    );
    if (decided?.type === 'approval_decided') {
      throw new HttpError(
        409,
        `The call ${callId} of task ${taskId} was decided already (${decided.data.approved ? 'approved' : 'denied'}); the first decision stands`,
      );
    }
    throw new HttpError(
      404,
      `Task ${taskId} is not waiting for an approval of call ${callId}; GET /agent/approvals lists what tasks wait for`,
    );
  }
  let status: string;
  let decided = {
    decided_by: by as string | null,
    decided_at: new Date().toISOString() as string | null,
  };
  if (pending.kind === 'unknown_outcome') {
    // The agent-server's own question: decided in the store, where the waiting worker reads it.
    const decision = unknownOutcomeDecision(pending.subject, body, by, decided.decided_at as string);
    if (!(await a.deps.store.decide(taskId, callId, decision)))
      throw new HttpError(409, `The call ${callId} of task ${taskId} was decided already`);
    status = body.fail ? 'failed' : body.approve ? 'approved' : 'denied';
  } else {
    if (body.fail)
      throw new HttpError(400, '`fail` is for a call of unknown outcome; this approval takes approve only');
    const approval = await relayDecision(a.deps.gateway, pending.approval_id, body, authorization);
    status = approval.status;
    decided = { decided_by: approval.decided_by, decided_at: approval.decided_at };
  }
  a.worker.waiter.poke(taskId);
  // Workers in other processes waiting for it ask again now.
  if (pending.kind !== 'unknown_outcome') await a.deps.store.wake().catch(() => {});
  if (paused && !a.worker.running.has(taskId)) resumePaused(a, paused);
  return { task_id: taskId, call_id: callId, status, ...decided, reason: body.reason ?? null };
}
