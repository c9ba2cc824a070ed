import type {
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { GatewayTool } from '../../mcp-gateway/contract.ts';
import { type LoopRun, snapshotAt } from './state.ts';
import { type ApprovalDecision, runToolCalls } from './tool-step.ts';

/**
 * Runs a reply's tool calls (or, resuming, the rest of them), pausing for approvals and consents on the way, and adds their
 * tool messages to the conversation. A pause stores the loop as it stands at the call that waits.
 */
export async function answerCalls(
  run: LoopRun,
  calls: ChatCompletionMessageFunctionToolCall[],
  step: number,
  tools: GatewayTool[],
  resume?: { index: number; done: ChatCompletionMessageParam[]; decision?: ApprovalDecision },
): Promise<void> {
  const { deps, state } = run;
  const { awaitApproval, awaitConsent } = deps;
  const at = (p: { index: number; done: ChatCompletionMessageParam[] }) =>
    snapshotAt(state, { step, calls, index: p.index, done: p.done, tools });
  state.answered = [...(resume?.done ?? [])];
  const toolMessages = await runToolCalls(calls, {
    sessionId: run.sessionId,
    step,
    gateway: run.gateway,
    emit: deps.emit,
    signal: deps.signal,
    tools,
    used: state.used,
    exposure: state.exposure,
    resume,
    answered: (message) => state.answered.push(message),
    journal: deps.journal,
    calls: deps.calls,
    quota: deps.quota,
    scriptLimits: deps.scriptLimits,
    awaitApproval: awaitApproval && ((pending) => awaitApproval(pending, at(pending))),
    awaitConsent: awaitConsent && ((pending) => awaitConsent(pending, at(pending))),
  });
  state.answered = [];
  state.messages.push(...toolMessages);
}
