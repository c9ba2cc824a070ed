import type {
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { Quota } from '../../lib/identity/quota.ts';
import type { TokenCounter } from '../../lib/telemetry/tokens.ts';
import type { GatewayTool } from '../../mcp-gateway/contract.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import type { Model, ModelReply, ModelRequest } from '../clients/model.ts';
import type { FinalStatus, TokenTotals, ToolExposure, Usage } from '../contract.ts';
import type { ScriptLimits } from '../sandbox/limits.ts';
import type { TaskOutcome, ThreadContext } from '../store/interface.ts';
import { FALLBACK_CONTEXT_TOKENS, hasMovedOut, readStored } from './context.ts';
import type { LiveEmit } from './deltas.ts';
import { createExposure, type Exposure } from './exposure.ts';
import type { ApprovalDecision, CallJournal, ConsentCall, Emit, PendingCall } from './tool-step.ts';

// The loop as it stands between its steps: the conversation, its counts and the toolsets it used. A pause
// stores a snapshot of it and the checkpoint before a reply's calls run records one; the loop ends with an
// outcome made from it. Every part of the loop (loop.ts, turn.ts, answer.ts, resume.ts) works on one run.

/** A paused loop, as stored while a task waits for an approval: everything needed to go on from there. */
export interface LoopSnapshot {
  messages: ChatCompletionMessageParam[];
  steps: number;
  usage: Usage;
  tokens: TokenTotals;
  used: string[];
  /** The task's exposure mode, and (dispatch) the tools whose definitions the conversation holds. */
  exposure?: ToolExposure;
  shown?: string[];
  /** Where this task's turn starts in its thread's conversation, and how its compaction stood. */
  turnStart?: number;
  context?: ThreadContext;
  /** The task's trace attempt this was saved in, so the attempt going on from it links to it (tasks/trace.ts). */
  trace?: { parent: string; attempt: number };
  /** The reply being answered: its tool calls, the one waiting, and the tool messages of those before it. */
  pending: {
    step: number;
    calls: ChatCompletionMessageFunctionToolCall[];
    index: number;
    done: ChatCompletionMessageParam[];
    tools: GatewayTool[];
  };
}

/** What the loop needs. */
export interface LoopDeps {
  model: Model;
  modelName: string;
  gateway: GatewayClient;
  emit: Emit;
  /** Tells the task's followers what is not stored: the model's text as it streams (absent: nobody hears it). */
  live?: LiveEmit;
  tokens: TokenCounter;
  /** Aborted (with a TaskStoppedError) when the task is cancelled or runs out of time. */
  signal?: AbortSignal;
  /** Pauses the task until a human decides on a call the policy asks about; `snapshot` is what to persist. */
  awaitApproval?: (pending: PendingCall, snapshot: LoopSnapshot) => Promise<ApprovalDecision>;
  /** Pauses the task until its owner connects the account a refused call needs; `snapshot` is what to persist. */
  awaitConsent?: (pending: ConsentCall, snapshot: LoopSnapshot) => Promise<ApprovalDecision>;
  /**
   * Where the task records its progress so another worker can go on from it: each reply with tool calls
   * before they run (`checkpoint`), and each call as it starts and ends.
   */
  journal?: CallJournal & { checkpoint(snapshot: LoopSnapshot): Promise<void> };
  /** This worker's name, in a `task_resumed` event. */
  worker?: string;
  /** What groups the task's requests in the provider's prompt cache: its thread's id, or its own without one. */
  cacheKey?: string;
  /** The task and the fence this worker holds it under: each tool call carries them to the gateway. */
  calls?: { taskId: string; fence(): number | undefined };
  /** The task's trace (tasks/trace.ts), told each request and reply when tracing is on. */
  trace?: { request(request: ModelRequest): void; reply(reply: ModelReply): void };
  /** The model's context budget in tokens (compaction keeps requests under it). */
  contextTokens?: number;
  /** The task's owner's limits (lib/identity/quota.ts): model tokens a day, tool calls a minute. */
  quota?: Quota;
  /** The bounds of a run_code script (code mode); the sandbox's defaults when absent. */
  scriptLimits?: ScriptLimits;
  /** exposure auto: the catalog's tool-definition tokens up to which a task loads every toolset. */
  autoExposureTokens?: number;
}

/** How a task's loop ended: what the store records as the task's end. */
export type LoopOutcome = TaskOutcome;

/** The loop as it stands: what a snapshot stores, and what the outcome reports. */
export interface LoopState {
  messages: ChatCompletionMessageParam[];
  steps: number;
  readonly usage: Usage;
  readonly tokens: TokenTotals;
  readonly used: Set<string>;
  readonly exposure: Exposure;
  /** The model's replies cut off at its output token limit in a row (turn.ts). */
  cutOffs: number;
  /** Where this task's turn starts in `messages` (the thread's earlier turns come before it). */
  turnStart: number;
  /** The tool messages of the reply being answered, as its calls end (they join `messages` once all did). */
  answered: ChatCompletionMessageParam[];
  /** What of the conversation is compacted (context.ts), its budget, and the stubs made for the view. */
  context: ThreadContext;
  readonly budget: number;
  readonly stubs: Map<number, ChatCompletionMessageParam>;
}

/** One run of the loop: its state, and what it works with. */
export interface LoopRun {
  readonly sessionId: string;
  readonly deps: LoopDeps;
  /** The gateway, keeping the session's tool list between steps and replacing it when toolsets change. */
  readonly gateway: GatewayClient;
  readonly state: LoopState;
}

/** The usage of a loop that has asked nothing yet. */
export function noUsage(): Usage {
  return { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
}

/** Adds a reply's usage to the loop's, with the prompt tokens read from and written to the provider's cache. */
export function addUsage(usage: Usage, reply: ModelReply): void {
  usage.prompt_tokens += reply.usage.prompt_tokens;
  usage.completion_tokens += reply.usage.completion_tokens;
  usage.total_tokens += reply.usage.total_tokens;
  if (typeof reply.cached_tokens === 'number') {
    usage.cached_tokens = (usage.cached_tokens ?? 0) + reply.cached_tokens;
  }
  if (typeof reply.cache_write_tokens === 'number') {
    usage.cache_write_tokens = (usage.cache_write_tokens ?? 0) + reply.cache_write_tokens;
  }
}

/** The token figures of a loop that has sent no request yet. */
export function noTokens(tokenizer: string): TokenTotals {
  return {
    tokenizer,
    requests: 0,
    tool_definition_tokens: 0,
    all_toolsets_tool_tokens: 0,
    all_toolsets_not_counted: [],
    message_tokens: 0,
  };
}

/** The state a loop starts from: a saved one (a pause, a checkpoint) or a fresh one, its conversation to come. */
export function startState(
  saved: LoopSnapshot | undefined,
  mode: ToolExposure | undefined,
  tokenizer: string,
  budget = FALLBACK_CONTEXT_TOKENS,
): LoopState {
  const exposure = createExposure(saved?.exposure ?? mode);
  for (const name of saved?.shown ?? []) exposure.shown.add(name);
  const state: LoopState = {
    messages: [],
    steps: saved?.steps ?? 0,
    usage: saved?.usage ?? noUsage(),
    tokens: saved?.tokens ?? noTokens(tokenizer),
    used: new Set<string>(saved?.used),
    exposure,
    cutOffs: 0,
    turnStart: saved?.turnStart ?? 0,
    answered: [],
    context: saved?.context ?? {},
    budget,
    stubs: new Map(),
  };
  // Offered (and so answered) only once something was moved out of view: before that the name is the tools'.
  exposure.readStored = (args) => (hasMovedOut(state.context) ? readStored(state.messages, args) : undefined);
  return state;
}

/** The loop as it stands, answering call `index` of the reply `calls` of `step`. */
export function snapshotAt(state: LoopState, pending: LoopSnapshot['pending']): LoopSnapshot {
  return {
    messages: state.messages,
    steps: state.steps,
    usage: state.usage,
    tokens: state.tokens,
    used: [...state.used],
    exposure: state.exposure.mode,
    shown: [...state.exposure.shown],
    turnStart: state.turnStart,
    context: state.context,
    pending,
  };
}

/** The loop's outcome as it stands. */
export function endWith(
  state: LoopState,
  status: FinalStatus,
  final_answer: string | null,
  error: string | null,
): LoopOutcome {
  return {
    status,
    final_answer,
    error,
    steps: state.steps,
    usage: state.usage,
    toolsets_used: [...state.used],
    tokens: state.tokens,
    transcript: transcriptOf(state, status, final_answer),
  };
}

/**
 * What a turn adds to its thread: its messages (from the system prompt on a first turn), its answer; and, written
 * with them (so a turn that never ended leaves nothing behind), how the thread's compaction stands after it.
 */
export interface Transcript {
  messages: ChatCompletionMessageParam[];
  /** The exposure the turn ran with, and (dispatch, code) the tools whose definitions the conversation holds. */
  exposure: ToolExposure;
  shown?: string[];
  context?: ThreadContext;
}

/**
 * The turn's messages as the thread keeps them: every tool call answered (a call the task ended before is
 * answered as not run, so the next turn's request is well formed), then the answer.
 */
function transcriptOf(state: LoopState, status: FinalStatus, answer: string | null): Transcript {
  // The calls of the reply being answered that ended before the task did are answered as they ran.
  const added = [...state.messages.slice(state.turnStart), ...state.answered];
  const messages: ChatCompletionMessageParam[] = [];
  for (let i = 0; i < added.length; i++) {
    const m = added[i];
    messages.push(m);
    if (m.role !== 'assistant' || !m.tool_calls?.length) continue;
    const answered = new Set<string>();
    while (added[i + 1]?.role === 'tool') {
      const t = added[++i] as { tool_call_id: string };
      answered.add(t.tool_call_id);
      messages.push(added[i]);
    }
    for (const c of m.tool_calls)
      if (!answered.has(c.id))
        messages.push({
          role: 'tool',
          tool_call_id: c.id,
          content: `Not run: the task ended (${status}) before this call ran.`,
        });
  }
  if (status === 'completed' && answer !== null) messages.push({ role: 'assistant', content: answer });
  const exposure = state.exposure.mode;
  const compacted = (state.context.summarised ?? 0) > 0 || (state.context.stubbed?.length ?? 0) > 0;
  return {
    messages,
    exposure,
    ...(exposure !== 'native' ? { shown: [...state.exposure.shown] } : {}),
    ...(compacted ? { context: state.context } : {}),
  };
}

/** The transcript of a turn that ends before its loop went on from `saved` (a pause, a checkpoint). */
export function transcriptOfSaved(saved: LoopSnapshot, status: FinalStatus, tokenizer: string): Transcript {
  const state = startState(saved, saved.exposure, tokenizer);
  state.messages = saved.messages;
  state.answered = [...saved.pending.done];
  return transcriptOf(state, status, null);
}
