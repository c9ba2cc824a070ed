import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { LimitReached } from '../../lib/identity/limits.ts';
import type { Quota } from '../../lib/identity/quota.ts';
import type { Approval, GatewayTool } from '../../mcp-gateway/contract.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import type { EventData, EventType } from '../contract.ts';
import { TaskStoppedError } from '../errors.ts';
import type { ScriptLimits } from '../sandbox/limits.ts';
import { RUN_CODE, type ScriptHooks } from './code-mode.ts';
import { READ_STORED_RESULT } from './context.ts';
import { calledName } from './dispatch.ts';
import type { Exposure } from './exposure.ts';
import { HumanEndedTask, type KeyedCall, safeToRepeat, unknownOutcomeQuestion } from './lost-answer.ts';
import { MANAGE_TOOLSETS } from './manage-toolsets.ts';
import { type ConsentAsked, executeToolCall, type ToolCallOutcome } from './tool-execution.ts';

/** Records a step; the one call through which every event of a task leaves the loop. */
/** Records an event; `data` is what the contract says that type of event carries (EventData). */
export type Emit = <T extends EventType>(type: T, data: EventData[T], durationMs?: number) => void;

/** How much of a tool's output an event keeps (the model gets all of it). */
const EVENT_OUTPUT_CHARS = 2000;
/** How much of a run_code script its start event shows. */
const SCRIPT_EVENT_CHARS = 8000;

const since = (start: number) => Math.round((performance.now() - start) * 100) / 100;

/** Throws the task's stop reason once it has been cancelled or has run out of time. */
export function throwIfStopped(signal: AbortSignal | undefined): void {
  if (!signal?.aborted) return;
  throw signal.reason instanceof TaskStoppedError ? signal.reason : new TaskStoppedError('cancelled');
}

/** A human's answer to an approval, and what the model is told when it is not a yes. */
export interface ApprovalDecision {
  approved: boolean;
  /** Why not (denied with a reason, or no answer in time), for the model. */
  message?: string;
  /** A call of unknown outcome not run again: the whole tool message the model gets instead. */
  skipped?: string;
  /** The task is to end failed, saying this. */
  fail?: string;
}

/** What a task waits for a human about: an approval the gateway recorded, or a call of unknown outcome. */
export type AskedApproval = Pick<Approval, 'id' | 'subject' | 'arguments' | 'reason' | 'expires_at'> & {
  kind: Approval['kind'] | 'unknown_outcome';
};

/** A call's record once it ended: its tool message (null: it did not run) and the loop state after it. */
export interface CallResult {
  message: ChatCompletionMessageParam | null;
  used: string[];
  shown: string[];
}

/** Where a task records its calls as they start and end (tasks/agent.ts: the task store, fenced). */
export interface CallJournal {
  started(index: number, callId: string): Promise<void>;
  finished(index: number, callId: string, result: CallResult): Promise<void>;
}

/** A tool call that waits for a human yes, with what the reply's earlier calls already answered. */
export interface PendingCall {
  call: ChatCompletionMessageFunctionToolCall;
  approval: AskedApproval;
  /** The call's position in the reply. */
  index: number;
  /** The tool messages of the reply's calls before it. */
  done: ChatCompletionMessageParam[];
}

/** A tool call refused until the task's owner connects their own account, with what the reply answered before it. */
export interface ConsentCall {
  call: ChatCompletionMessageFunctionToolCall;
  consent: ConsentAsked;
  index: number;
  done: ChatCompletionMessageParam[];
}

/** What one reply's tool calls need: the session, the gateway, where events go, and the stop signal. */
export interface ToolStepContext {
  sessionId: string;
  step: number;
  gateway: GatewayClient;
  emit: Emit;
  signal?: AbortSignal;
  /** The tools offered in the request this reply answers (to know which toolset a call used). */
  tools: readonly GatewayTool[];
  /** Toolsets the task has used so far; calls add to it. */
  used: Set<string>;
  /** How the task shows tools (dispatch: calls come through call_tool); native when absent. */
  exposure?: Exposure;
  /** Waits for a human's decision on a call the policy asks about (absent: the refusal goes to the model). */
  awaitApproval?: (pending: PendingCall) => Promise<ApprovalDecision>;
  /**
   * Waits for the owner to connect the account a refused call needs (absent: the refusal goes to the model);
   * a decision with `fail` ends the task.
   */
  awaitConsent?: (pending: ConsentCall) => Promise<ApprovalDecision>;
  /**
   * Resuming a reply: start at this call, after these tool messages, with its decision known (none: a call
   * that never started, or one safe to run again).
   */
  /** Hears each tool message as its call ends (the loop's record of a reply half answered). */
  answered?: (message: ChatCompletionMessageParam) => void;
  resume?: { index: number; done: ChatCompletionMessageParam[]; decision?: ApprovalDecision };
  /** Records each call as it starts and ends, so a task resumed elsewhere knows what ran. */
  journal?: CallJournal;
  /** The task and the fence this worker holds it under: each call's idempotency key and lease. */
  calls?: { taskId: string; fence(): number | undefined };
  /** The owner's limits: a tool call past the minute's waits for the next minute (`limit_wait`). */
  quota?: Quota;
  /** The bounds of a run_code script (code mode). */
  scriptLimits?: ScriptLimits;
}

/** A call id as a key part: printable ASCII as it is, anything else by its hash. */
const keyPart = (id: string) =>
  /^[\x21-\x7e]{1,256}$/.test(id) ? id : createHash('sha256').update(id).digest('hex').slice(0, 32);

/**
 * A call's idempotency key and lease: one key per task, lease, reply and call, so asking again after a lost
 * answer repeats the key, and a run after a new claim (a human's "run again", a safe call re-run) is new.
 */
function keyedFor(ctx: ToolStepContext, index: number, call: ChatCompletionMessageFunctionToolCall) {
  const calls = ctx.calls;
  if (!calls) return undefined;
  const fence = calls.fence();
  const key = `${calls.taskId}:${fence ?? 0}:${ctx.step}:${index}:${keyPart(call.id)}`;
  return (name: string): KeyedCall => ({
    idempotency_key: key,
    ...(fence !== undefined ? { fence: { task_id: calls.taskId, fence } } : {}),
    safe: safeToRepeat(name, ctx.tools),
  });
}

/** The tool message for a call whose approval was not given. */
const notApproved = (
  call: ChatCompletionMessageFunctionToolCall,
  args: unknown,
  decision: ApprovalDecision,
): ToolCallOutcome => ({
  content:
    decision.skipped ??
    `Error: ${call.function.name} was not run: ${decision.message ?? 'a human denied it'}`,
  ok: false,
  arguments: args,
});

/**
 * A call sent whose answer was lost: handled as a call its worker stopped in the middle of. The call stays on
 * record as started and not ended, and the task waits for a human's decision (`unknown_outcome`); the model
 * hears nothing of it until then. "Run again" runs it under the lease the task is resumed under (a new key).
 */
async function lostAnswer(
  call: ChatCompletionMessageFunctionToolCall,
  name: string,
  index: number,
  done: readonly ChatCompletionMessageParam[],
  lost: ToolCallOutcome,
  ctx: ToolStepContext,
  run: () => Promise<ToolCallOutcome>,
): Promise<ToolCallOutcome> {
  const question = unknownOutcomeQuestion(call, name, 'answer_lost');
  if (!ctx.awaitApproval) throw new HumanEndedTask(`Task failed: ${question.reason}`);
  const decision = await ctx.awaitApproval({ call, approval: question, index, done: [...done] });
  throwIfStopped(ctx.signal);
  if (decision.fail) throw new HumanEndedTask(decision.fail);
  if (!decision.approved) return notApproved(call, lost.arguments, decision);
  const again = await run();
  return again.lost ? lostAnswer(call, name, index, done, again, ctx, run) : again;
}

/**
 * Runs a reply's tool calls in order, each announced (`tool_call_started`) and recorded (`tool_call`, or
 * `toolset_change` for a change of toolsets), and returns the tool messages. A stopped task runs no further
 * call: the signal is checked before each, and a call in flight is abandoned.
 */
export async function runToolCalls(
  calls: readonly ChatCompletionMessageFunctionToolCall[],
  ctx: ToolStepContext,
): Promise<ChatCompletionMessageParam[]> {
  const messages: ChatCompletionMessageParam[] = [...(ctx.resume?.done ?? [])];
  const toolsetOf = new Map(ctx.tools.map((t) => [t.name, t.toolset]));
  for (const [index, call] of calls.entries()) {
    if (ctx.resume && index < ctx.resume.index) continue;
    throwIfStopped(ctx.signal);
    const started = performance.now();
    const name = (ctx.exposure?.mode ?? 'native') !== 'native' ? calledName(call) : call.function.name;
    ctx.emit('tool_call_started', { step: ctx.step, tool_call_id: call.id, name, ...scriptOf(call, ctx) });
    // A script is not a call: each of its calls counts on its own.
    const counted = name !== MANAGE_TOOLSETS && name !== READ_STORED_RESULT && name !== RUN_CODE;
    if (ctx.quota && counted) await withinQuota(ctx, call.id);
    const outcome = await callOutcome(call, index, name, messages, ctx);
    throwIfStopped(ctx.signal);
    const message: ChatCompletionMessageParam = {
      role: 'tool',
      tool_call_id: call.id,
      content: outcome.content,
    };
    messages.push(message);
    ctx.answered?.(message);
    const toolset = toolsetOf.get(outcome.tool ?? call.function.name);
    if (outcome.ok && toolset) ctx.used.add(toolset);
    if (outcome.change?.action === 'ACTIVATE') for (const id of outcome.change.toolset_ids) ctx.used.add(id);
    await ctx.journal?.finished(index, call.id, {
      message,
      used: [...ctx.used],
      shown: [...(ctx.exposure?.shown ?? [])],
    });
    emitOutcome(ctx, call, outcome, toolset, started);
  }
  return messages;
}

/**
 * Counts the call against the owner's tool calls a minute; past the limit, waits (told as `limit_wait`) for the
 * next minute and counts it then. A cancel or the task's time running out ends the wait.
 */
async function withinQuota(ctx: ToolStepContext, callId: string): Promise<void> {
  for (;;) {
    try {
      return await (ctx.quota as Quota).beforeToolCall();
    } catch (err) {
      if (!(err instanceof LimitReached)) throw err;
      const { limit, retryAfterS, subject } = err;
      ctx.emit('limit_wait', { step: ctx.step, tool_call_id: callId, limit, subject, seconds: retryAfterS });
      await sleep(retryAfterS * 1000, undefined, { signal: ctx.signal }).catch(() => undefined);
      throwIfStopped(ctx.signal);
    }
  }
}

/**
 * What one call came to: run (on record before it runs), or not run for a human's no; a call the policy asks
 * about waits for the decision, and a call whose answer was lost for a human's word on running it again.
 */
async function callOutcome(
  call: ChatCompletionMessageFunctionToolCall,
  index: number,
  name: string,
  messages: readonly ChatCompletionMessageParam[],
  ctx: ToolStepContext,
): Promise<ToolCallOutcome> {
  const journal = ctx.journal;
  const once = async () => {
    // On record before it runs: if this worker stops now, whoever resumes the task knows it may have run.
    await journal?.started(index, call.id);
    const ran = await executeToolCall(
      call,
      ctx.sessionId,
      ctx.gateway,
      ctx.signal,
      ctx.exposure,
      keyedFor(ctx, index, call),
      scriptHooks(ctx, call.id),
    );
    // Refused for an approval or a consent: nothing ran (a resumed task asks again).
    if (ran.approval || ran.consent)
      await journal?.finished(index, call.id, { message: null, used: [], shown: [] });
    return ran;
  };
  // Refused until the owner connects their account: the task waits (paused, on record), then calls again;
  // the model hears only the call's real outcome.
  const run = async () => {
    let ran = await once();
    while (ran.consent && ctx.awaitConsent) {
      const decision = await ctx.awaitConsent({ call, consent: ran.consent, index, done: [...messages] });
      throwIfStopped(ctx.signal);
      if (decision.fail) throw new HumanEndedTask(decision.fail);
      ran = await once();
    }
    return ran;
  };
  const resumed = ctx.resume && index === ctx.resume.index ? ctx.resume.decision : undefined;
  let outcome =
    resumed && !resumed.approved ? notApproved(call, call.function.arguments, resumed) : await run();
  if (outcome.approval && ctx.awaitApproval && !resumed) {
    // The operator's policy asks a human: the task waits (paused, on record) and then runs or reports it.
    const decision = await ctx.awaitApproval({
      call,
      approval: outcome.approval,
      index,
      done: [...messages],
    });
    throwIfStopped(ctx.signal);
    outcome = decision.approved ? await run() : notApproved(call, outcome.arguments, decision);
  }
  if (outcome.lost) outcome = await lostAnswer(call, name, index, messages, outcome, ctx, run);
  return outcome;
}

/** The script of a code task's run_code call, for its start event (cut at SCRIPT_EVENT_CHARS). */
function scriptOf(call: ChatCompletionMessageFunctionToolCall, ctx: ToolStepContext): { script?: string } {
  if (ctx.exposure?.mode !== 'code' || call.function.name !== RUN_CODE) return {};
  try {
    const code = (JSON.parse(call.function.arguments) as { code?: unknown } | null)?.code;
    return typeof code === 'string' ? { script: code.slice(0, SCRIPT_EVENT_CHARS) } : {};
  } catch {
    return {};
  }
}

/**
 * What a run_code script's calls tell the task: each starts (counted against the owner's limits) and ends as
 * an event of its own, `in_script` naming the run_code call, and a toolset it used counts as used.
 */
function scriptHooks(ctx: ToolStepContext, callId: string): ScriptHooks {
  const id = (index: number) => `${callId}#${index + 1}`;
  return {
    ...(ctx.scriptLimits ? { limits: ctx.scriptLimits } : {}),
    started: async (index, name) => {
      ctx.emit('tool_call_started', { step: ctx.step, tool_call_id: id(index), name, in_script: callId });
      if (ctx.quota) await withinQuota(ctx, id(index));
    },
    ended: (seen) => {
      if (seen.ok && seen.toolset) ctx.used.add(seen.toolset);
      ctx.emit(
        'tool_call',
        {
          step: ctx.step,
          tool_call_id: id(seen.index),
          name: seen.name,
          toolset: seen.toolset,
          arguments: boundedArguments(seen.args),
          ok: seen.ok,
          result_bytes: Buffer.byteLength(seen.content),
          output: cut(seen.content),
          in_script: callId,
        },
        Math.round(seen.ms * 100) / 100,
      );
    },
  };
}

/** A script's call's arguments as its event keeps them: whole up to 2,000 characters of JSON, else cut. */
function boundedArguments(args: Record<string, unknown>): unknown {
  const text = JSON.stringify(args);
  return text.length <= EVENT_OUTPUT_CHARS
    ? args
    : { cut: `${text.slice(0, EVENT_OUTPUT_CHARS)}…`, length: text.length };
}

const cut = (text: string) =>
  text.length > EVENT_OUTPUT_CHARS ? `${text.slice(0, EVENT_OUTPUT_CHARS)}…` : text;

/** The call's event: `toolset_change` for a change of toolsets, else `tool_call` with its output cut short. */
function emitOutcome(
  ctx: ToolStepContext,
  call: ChatCompletionMessageFunctionToolCall,
  outcome: ToolCallOutcome,
  toolset: string | undefined,
  started: number,
): void {
  const resultBytes = Buffer.byteLength(outcome.content);
  if (outcome.change) {
    ctx.emit(
      'toolset_change',
      {
        step: ctx.step,
        tool_call_id: call.id,
        ...outcome.change,
        ...(outcome.toolTokens ? { tool_definition_tokens: outcome.toolTokens } : {}),
        ...(outcome.automatic ? { automatic: true } : {}),
      },
      since(started),
    );
    // Activated for a call (activation without a turn): the call is recorded too.
    if (!outcome.automatic) return;
  }
  ctx.emit(
    'tool_call',
    {
      step: ctx.step,
      tool_call_id: call.id,
      name: outcome.tool ?? call.function.name,
      toolset: toolset ?? (outcome.automatic ? outcome.change?.toolset_ids[0] : undefined) ?? null,
      arguments: outcome.arguments,
      ok: outcome.ok,
      result_bytes: resultBytes,
      output: cut(outcome.content),
    },
    since(started),
  );
}
