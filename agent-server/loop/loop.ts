import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ListToolsetsResponse } from '../../mcp-gateway/contract.ts';
import { manageToolsetsDefinition } from '../../mcp-gateway/contract.ts';
import type { ToolExposure } from '../contract.ts';
import { ModelError, TaskStoppedError } from '../errors.ts';
import type { ThreadContext } from '../store/interface.ts';
import { answerCalls } from './answer.ts';
import { AUTO_EXPOSURE_TOKENS, loadAllIfSmall } from './auto-exposure.ts';
import { contextBudget } from './context.ts';
import { systemPromptFor } from './exposure.ts';
import { HumanEndedTask } from './lost-answer.ts';
import { primedNote, primeToolsets } from './prime.ts';
import type { RecordedCall } from './recovery.ts';
import { goOnFromPause, goOnFromTakeover } from './resume.ts';
import {
  endWith,
  type LoopDeps,
  type LoopOutcome,
  type LoopRun,
  type LoopSnapshot,
  type LoopState,
  snapshotAt,
  startState,
} from './state.ts';
import { withToolList } from './tool-list.ts';
import type { ApprovalDecision, Emit } from './tool-step.ts';
import { type AllToolsets, allToolsetsTokens, askModel, prepareTurn, resolveReply } from './turn.ts';

/** A thread's earlier turns as a task continuing it gets them (tasks/run.ts reads them from the store). */
export interface ThreadInput {
  /** The conversation so far: its turns' transcripts in order (empty on a thread's first turn). */
  messages: ChatCompletionMessageParam[];
  /** Dispatch: the tools whose definitions the conversation holds. */
  shown: string[];
  /** The exposure the thread started with (its system prompt was written for it). */
  exposure?: ToolExposure;
  context: ThreadContext;
}

// The tool-calling loop, by concern: the state it keeps and stores (state.ts), a turn prepared, asked and
// resolved (turn.ts), a reply's tool calls run (answer.ts, over tool-step.ts), and going on from a pause or
// another worker's claim (resume.ts). This file runs them in order.

export { allToolsetsTokens, CUT_OFF_NOTE } from './turn.ts';
export type { Emit, LoopDeps, LoopOutcome, LoopSnapshot };

/** What a task's loop is asked to do. */
export interface LoopInput {
  sessionId: string;
  goal: string;
  maxSteps: number;
  /** How the model sees tools (TOOL_EXPOSURE or the request's `exposure`); native when absent. */
  exposure?: ToolExposure;
  /** Start with the toolset discovery is certain of for the goal (prime.ts). */
  prime?: boolean;
  /** The thread the task is a turn of: its earlier turns' messages and how its compaction stands. */
  thread?: ThreadInput;
  /** Going on from a pause, with the human's decision on the call that waited (none: a consent given). */
  resume?: { snapshot: LoopSnapshot; decision?: ApprovalDecision };
  /**
   * Going on from another worker's claim: its last checkpoint (null: none, the task starts over) and the
   * calls it recorded since.
   */
  recovered?: {
    snapshot: LoopSnapshot | null;
    recorded: RecordedCall[];
    /** Starting over (no checkpoint): the toolsets primed for it the first time (prime.ts). */
    primed?: string[];
  };
}

/** The tool-calling loop: model ⇄ tools until the model answers without tool calls or max_steps runs out. */
export async function runLoop(input: LoopInput, deps: LoopDeps): Promise<LoopOutcome> {
  const saved = input.resume?.snapshot ?? input.recovered?.snapshot ?? undefined;
  const budget = contextBudget(deps.modelName, deps.contextTokens);
  const state = startState(saved, input.thread?.exposure ?? input.exposure, deps.tokens.name, budget);
  // The session's tool list is kept between steps and replaced when toolsets change (tool-list.ts).
  const run: LoopRun = {
    sessionId: input.sessionId,
    deps,
    gateway: withToolList(deps.gateway, input.sessionId),
    state,
  };
  try {
    const all = await openConversation(run, input, saved);
    if (input.resume && saved) {
      const ended = await goOnFromPause(run, saved.pending, input.resume.decision);
      if (ended) return ended;
    }
    if (input.recovered) {
      const ended = await goOnFromTakeover(run, saved?.pending, input.recovered.recorded);
      if (ended) return ended;
    }
    while (state.steps < input.maxSteps) {
      const turn = await prepareTurn(run, all);
      const reply = await askModel(run, turn, all);
      const resolved = resolveReply(state, reply);
      if (resolved.next === 'ask_again') continue;
      if (resolved.next === 'end') return resolved.outcome;
      // On record before any of its calls runs: a worker taking the task over goes on from this reply.
      const pending = { step: turn.step, calls: reply.tool_calls, index: 0, done: [], tools: turn.tools };
      await deps.journal?.checkpoint(snapshotAt(state, pending));
      await answerCalls(run, reply.tool_calls, turn.step, turn.tools);
    }
    const why = `The task reached max_steps (${input.maxSteps}) without a final answer`;
    return endWith(state, 'max_steps', null, why);
  } catch (err) {
    return endOnError(state, err, deps.signal);
  }
}

/**
 * What a task starting afresh has active before the model is first asked: every toolset when its exposure is
 * auto and they are few (auto-exposure.ts), else the toolset its goal certainly needs (prime.ts), if any.
 */
async function startingToolsets(
  run: LoopRun,
  input: LoopInput,
  auto: boolean,
  meta: number,
): Promise<{ ids: string[]; listing?: ListToolsetsResponse }> {
  const { sessionId, deps, gateway } = run;
  const threshold = deps.autoExposureTokens ?? AUTO_EXPOSURE_TOKENS;
  const read = auto
    ? await loadAllIfSmall(sessionId, gateway.priming(), meta, threshold, deps.emit, deps.signal)
    : undefined;
  if (read && read.loaded.length > 0) return { ids: read.loaded };
  if (!input.prime) return { ids: [], ...(read ? { listing: read.listing } : {}) };
  // Priming may change the session: the catalog is read again after it.
  return { ids: await primeToolsets(input.goal, sessionId, gateway.priming(), deps.emit, deps.signal) };
}

/**
 * The conversation the loop starts from: a saved one, or the system prompt and the goal. A task starting
 * afresh has the toolset its goal certainly needs active before the model is first asked.
 */
async function openConversation(
  run: LoopRun,
  input: LoopInput,
  saved: LoopSnapshot | undefined,
): Promise<AllToolsets> {
  const { sessionId, deps, gateway, state } = run;
  const { signal } = deps;
  const meta = deps.tokens.tool(manageToolsetsDefinition);
  const auto = state.exposure.mode === 'auto';
  // Decided once, at the start: the task then runs native (auto-exposure.ts).
  if (auto) state.exposure.mode = 'native';
  // Taken over before its first checkpoint, a task starts again: what was primed then is active still (no
  // call ran to change it), and the model is told of it as it was the first time.
  const start = input.recovered?.primed
    ? { ids: input.recovered.primed }
    : !saved && !input.resume
      ? await startingToolsets(run, input, auto, meta)
      : { ids: [] };
  const primed = start.ids;
  for (const id of primed) state.used.add(id);
  // The catalog as exposure auto read it, when nothing was activated since; else read now.
  const { toolsets, auto_activate } =
    start.listing ?? (await gateway.listToolsets(sessionId, undefined, signal));
  const all = { meta, ...allToolsetsTokens(toolsets, meta) };
  if (saved) {
    state.messages = saved.messages;
    return all;
  }
  const goal: ChatCompletionMessageParam = { role: 'user', content: input.goal + primedNote(primed) };
  const prior = input.thread?.messages ?? [];
  if (prior.length > 0 && input.thread) {
    // A later turn of a thread: the conversation so far (its system prompt first), then the new goal.
    for (const name of input.thread.shown) state.exposure.shown.add(name);
    state.context = input.thread.context;
    state.turnStart = prior.length;
    state.messages = [...prior, goal];
    return all;
  }
  const usable = await gateway.tools(sessionId, signal);
  const system = systemPromptFor(state.exposure, toolsets, usable, auto_activate === true);
  state.messages = [{ role: 'system', content: system }, goal];
  return all;
}

/** A loop stopped from outside ends with the stop's reason; any other failure fails the task, saying why. */
function endOnError(state: LoopState, err: unknown, signal: AbortSignal | undefined): LoopOutcome {
  const stop =
    err instanceof TaskStoppedError
      ? err
      : signal?.aborted && signal.reason instanceof TaskStoppedError
        ? signal.reason
        : undefined;
  if (stop) return endWith(state, stop.reason, null, stop.message);
  const message =
    err instanceof ModelError || err instanceof HumanEndedTask
      ? err.message
      : `Task failed: ${(err as Error).message}`;
  return endWith(state, 'failed', null, message);
}
