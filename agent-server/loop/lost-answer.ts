import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatCompletionMessageFunctionToolCall } from 'openai/resources/chat/completions';
import { ServiceError } from '../../lib/http/http-client.ts';
import type { CallFence, CallToolResponse, GatewayTool } from '../../mcp-gateway/contract.ts';
import { type GatewayClient, refusalCode } from '../clients/gateway.ts';
import { MANAGE_TOOLSETS } from './manage-toolsets.ts';

// A tool call whose answer was lost (docs/task-loop.md "A lost answer"): the request may have reached the
// gateway and run, but no answer came back — the connection was reset, a balancer answered 502/503/504 for a
// replica that died, the call timed out. That is an unknown outcome, not a failure. Every call carries its
// idempotency key, so asking again with the same key never runs it twice: the gateway answers the recorded
// outcome, or that the call is still running. A read-only or idempotent tool is asked again; any other goes
// to a human, like a call its worker stopped in the middle of (tool-step.ts).

/** A call's key and the lease it is sent under, and whether its tool may be asked again after a lost answer. */
export interface KeyedCall {
  idempotency_key: string;
  fence?: CallFence;
  /** The tool declares itself read-only or idempotent (recovery.ts safeToRepeat). */
  safe: boolean;
}

/** The answer of a call was lost after it may have run: what the human is asked about. */
export class AnswerLost extends Error {
  constructor(cause: unknown) {
    super(`the answer was lost (${(cause as Error).message})`, { cause });
    this.name = 'AnswerLost';
  }
}

/** A human chose to end the task over a call of unknown outcome: the task ends failed with this message. */
export class HumanEndedTask extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HumanEndedTask';
  }
}

/** How many times a call is sent in all when its answer is lost or it was not sent. */
export const LOST_ANSWER_ATTEMPTS = 4;
/** The wait before asking again, times the attempt number. */
const RETRY_MS = 250;

/** How a failed exchange with the gateway left the call: never sent, sent with its answer lost, or none of those. */
export function exchangeFailure(err: unknown): 'not_sent' | 'lost' | 'running' | undefined {
  if (!(err instanceof ServiceError)) return undefined;
  const code = refusalCode(err);
  if (code === 'in_progress') return 'running';
  // The gateway lost its backend's answer: the call may have run there.
  if (code === 'upstream_failed' && (err.body as { outcome?: unknown } | undefined)?.outcome === 'unknown')
    return 'lost';
  // The gateway's own answer (a refusal, a tool's failure, its own error): the outcome is known.
  if (code !== undefined || err.service === 'mcp-gateway') return undefined;
  // Refused at connect, or no address for the name: nothing was sent.
  const cause = (err.cause as { code?: unknown } | undefined)?.code;
  if (cause === 'ECONNREFUSED' || cause === 'ENOTFOUND' || cause === 'EAI_AGAIN') return 'not_sent';
  // Anything else after the request went out — a reset, a timeout, or an answer that is not the gateway's
  // own (a balancer's 500, 502–504, 520–524, 408 … for a replica that died after running it) — says nothing
  // of whether the call ran.
  return 'lost';
}

/**
 * Sends a keyed call; asks again with the same key while nothing was sent, or (a safe tool) while its answer
 * is lost or it is still running. Throws AnswerLost when the outcome stays unknown.
 */
export async function callKeyed(
  gateway: GatewayClient,
  sessionId: string,
  name: string,
  args: Record<string, unknown>,
  keyed: KeyedCall,
  signal?: AbortSignal,
): Promise<CallToolResponse> {
  const { safe, ...call } = keyed;
  let sent = false;
  for (let attempt = 1; ; attempt++) {
    try {
      return await gateway.callTool(sessionId, name, args, signal, call);
    } catch (err) {
      if (signal?.aborted) throw err;
      const failure = exchangeFailure(err);
      if (failure === undefined) throw err;
      if (failure !== 'not_sent') sent = true;
      if ((failure !== 'not_sent' && !safe) || attempt >= LOST_ANSWER_ATTEMPTS) {
        // Never sent at all: a plain failure the model may act on.
        if (!sent) throw err;
        throw new AnswerLost(err);
      }
      await sleep(RETRY_MS * attempt, undefined, { signal });
    }
  }
}
/** Whether running `name` twice does no more than running it once, by its tool's own declaration. */
export function safeToRepeat(name: string, tools: readonly GatewayTool[]): boolean {
  // Activating or deactivating toolsets sets a state: doing it again changes nothing.
  if (name === MANAGE_TOOLSETS) return true;
  const annotations = tools.find((t) => t.name === name)?.annotations;
  return annotations?.readOnlyHint === true || annotations?.idempotentHint === true;
}

/** Why a call's outcome is unknown: its worker stopped mid-call, or its answer was lost on the way back. */
export type UnknownBecause = 'worker_stopped' | 'answer_lost';

/** What the human is asked about a call that may have run. */
export function unknownOutcomeReason(name: string, because: UnknownBecause = 'worker_stopped'): string {
  const why =
    because === 'worker_stopped'
      ? 'the worker running it stopped before it ended'
      : 'it was sent and its answer was lost (the connection broke, or a gateway replica went away mid-call)';
  return (
    `the outcome of ${name} is unknown: ${why}, and the tool does not declare itself read-only or idempotent. ` +
    'Approve to run it again, deny to skip it (the model is told it may have run), or deny with fail: true to ' +
    'end the task'
  );
}

/** How long a human has to decide about a call of unknown outcome (the task's own time limit comes first). */
export const UNKNOWN_OUTCOME_WAIT_MS = 7 * 24 * 3600 * 1000;

/** A call's arguments as an object, for a human to read (null when they are not one). */
function argumentsOf(call: ChatCompletionMessageFunctionToolCall): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(call.function.arguments);
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/** The question a task waits on for a call of unknown outcome (kind `unknown_outcome`). */
export function unknownOutcomeQuestion(
  call: ChatCompletionMessageFunctionToolCall,
  name: string,
  because: UnknownBecause,
) {
  return {
    id: `outcome_${call.id}`,
    kind: 'unknown_outcome' as const,
    subject: name,
    arguments: argumentsOf(call),
    reason: unknownOutcomeReason(name, because),
    expires_at: new Date(Date.now() + UNKNOWN_OUTCOME_WAIT_MS).toISOString(),
  };
}
