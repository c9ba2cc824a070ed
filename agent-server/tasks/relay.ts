import { HttpError } from '../../lib/http/http.ts';
import { ServiceError } from '../../lib/http/http-client.ts';
import { type GatewayClient, refusalCode } from '../clients/gateway.ts';
import type { ExecuteTaskRequest } from '../contract.ts';
import { decisionBy, type HumanDecision } from './approval-wait.ts';

// What the agent-server asks of the gateway for a client of its own API, and how the gateway's answer becomes
// that client's error: a playbook rendered as a task's goal, and a human's decision on an approval.

/** A playbook's rendering as the goal; a bad name or argument is the client's error (400/404). */
export async function renderGoal(
  gateway: GatewayClient,
  prompt: NonNullable<ExecuteTaskRequest['prompt']>,
): Promise<string> {
  try {
    return (await gateway.renderPrompt(prompt.name, prompt.arguments)).text;
  } catch (err) {
    const code = refusalCode(err);
    if (code === 'not_found' || code === 'invalid_arguments') {
      throw new HttpError(code === 'not_found' ? 404 : 400, (err as Error).message);
    }
    throw err;
  }
}

/**
 * Relays a human's decision to the gateway with the human's own credential; a refused credential says which
 * one decides, an approval already decided (or gone) is a conflict.
 */
export async function relayDecision(
  gateway: GatewayClient,
  approvalId: string,
  body: { approve: boolean; reason?: string },
  authorization: string | undefined,
): Promise<{ status: string; decided_by: string | null; decided_at: string | null }> {
  try {
    return await gateway.decideApproval(approvalId, body, authorization);
  } catch (err) {
    if (err instanceof ServiceError && (err.status === 401 || err.status === 403)) {
      throw new HttpError(
        403,
        `The gateway refused the decision (${err.message}). Users of the agent's API decide approvals with ` +
          'AGENT_API_TOKEN, which the gateway must know too; or the operator decides with GATEWAY_ADMIN_TOKEN at ' +
          `POST /mcp/admin/approvals/${approvalId}.`,
      );
    }
    const code = refusalCode(err);
    if (code === 'not_found' || code === 'conflict') throw new HttpError(409, (err as Error).message);
    throw err;
  }
}

/** A human's decision on a call of unknown outcome, as the waiting task takes it; `by` decided it, `at` then. */
export function unknownOutcomeDecision(
  tool: string,
  body: { approve: boolean; reason?: string; fail?: boolean },
  by: string,
  at: string,
): HumanDecision {
  const why = body.reason ? `: ${body.reason}` : '';
  const recorded = decisionBy(by, at, body.reason);
  if (body.fail) {
    return {
      ...recorded,
      approved: false,
      fail: `A human ended the task: the outcome of ${tool} was unknown (its worker stopped mid-call, or its answer was lost)${why}`,
    };
  }
  if (body.approve)
    return { ...recorded, approved: true, message: `a human chose to run ${tool} again${why}` };
  return {
    ...recorded,
    approved: false,
    skipped:
      `Error: ${tool} was not run again. It started, and its worker stopped or its answer was lost, so it may have ` +
      `taken effect once already; a human chose not to repeat it${why}. Check its effect before relying on it.`,
  };
}
