import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ThreadContext } from '../store/interface.ts';
import { contentOf, contextView, stubCandidates, summaryCuts } from './context.ts';
import { addUsage, type LoopRun } from './state.ts';

// Compaction of a conversation near its model's context budget (context.ts says what the model then sees).
// Deterministic: the same conversation, budget and summary give the same view.

/** Compaction starts when a request would pass this share of the budget, and aims below the second. */
export const COMPACT_AT = 0.8;
export const COMPACT_TO = 0.5;
/** A tool result smaller than this stays in the view (its stub would save little). */
const STUB_MIN_TOKENS = 200;
/** The summary the model writes is cut to this many characters. */
const SUMMARY_CHARS = 8000;
/** Characters of one message the summary's model call reads. */
const MESSAGE_CHARS = 4000;

const SUMMARISE =
  'Summarise the conversation below for your own later use: the user’s goals, what was found and done (names, ' +
  'numbers, paths, ids and decisions that later turns may need), what was answered, and what is still open. ' +
  'Tool results that were moved out of the conversation are marked with a handle (rN); keep a handle where its ' +
  'result may matter later. Write plain text, at most about 600 words.';

/** What one compaction did, as its event tells it. */
export interface Compaction {
  stubbed: number;
  summarised_messages: number;
  tokens_before: number;
  tokens_after: number;
  /** Why the summary's model call failed (the stubs stand; the next request tries again). */
  summary_failed?: string;
}

/**
 * Compacts the run's conversation when a request of it (with `toolTokens` of tool definitions) would pass
 * COMPACT_AT of the budget: large old results are stubbed, oldest first, until the view is under COMPACT_TO;
 * if that is not enough, the turns before the current one are summarised by one model call (as many as needed,
 * oldest first). A summary that fails leaves the stubs alone (the turn goes on; the next request tries again).
 * Undefined when nothing needed doing (or could be done).
 */
export async function compactIfNeeded(run: LoopRun, toolTokens: number): Promise<Compaction | undefined> {
  const { deps, state } = run;
  const budget = state.budget;
  const count = (m: ChatCompletionMessageParam) => deps.tokens.messages([m]);
  const viewTokens = (c: ThreadContext) => deps.tokens.messages(contextView(state.messages, c, state.stubs));
  const before = viewTokens(state.context) + toolTokens;
  if (before <= budget * COMPACT_AT) return undefined;
  const target = budget * COMPACT_TO - toolTokens;
  const context: ThreadContext = { ...state.context, stubbed: [...(state.context.stubbed ?? [])] };
  const stubbed = context.stubbed as number[];
  let tokens = before - toolTokens;
  let summaryFailure: string | undefined;
  for (const c of stubCandidates(state.messages, context, count, STUB_MIN_TOKENS)) {
    if (tokens <= target) break;
    stubbed.push(c.index);
    tokens -= c.tokens - 60;
  }
  tokens = viewTokens(context);
  if (tokens > target) {
    const summarised = await summarise(run, context, target).catch((err: unknown) => {
      // A stopped task stops; a model that cannot summarise costs the summary, not the turn.
      if (deps.signal?.aborted) throw err;
      summaryFailure = (err as Error).message;
      return undefined;
    });
    if (summarised) Object.assign(context, summarised);
  }
  const newStubs = stubbed.filter((i) => !(state.context.stubbed ?? []).includes(i)).length;
  if (newStubs === 0 && context.summarised === state.context.summarised) {
    return summaryFailure
      ? {
          stubbed: 0,
          summarised_messages: context.summarised ?? 0,
          tokens_before: before,
          tokens_after: before,
          summary_failed: summaryFailure.slice(0, 500),
        }
      : undefined;
  }
  // Kept with the turn's transcript, written with its end: a turn that never ends leaves no compaction behind.
  state.context = context;
  return {
    stubbed: newStubs,
    summarised_messages: context.summarised ?? 0,
    tokens_before: before,
    tokens_after: viewTokens(context) + toolTokens,
    ...(summaryFailure ? { summary_failed: summaryFailure.slice(0, 500) } : {}),
  };
}

/**
 * The context with the oldest turns before the current one summarised: the fewest that bring the view under
 * `target`, or all of them. One model call, with the previous summary and those turns (each message cut).
 */
async function summarise(
  run: LoopRun,
  context: ThreadContext,
  target: number,
): Promise<ThreadContext | undefined> {
  const { deps, state } = run;
  const from = context.summarised ?? 0;
  const cuts = summaryCuts(state.messages, from + 1, state.turnStart);
  if (cuts.length === 0) return undefined;
  const tryCut = (cut: number): ThreadContext => ({
    summary: '…',
    summarised: cut - 1,
    stubbed: (context.stubbed ?? []).filter((i) => i >= cut),
  });
  const cut =
    cuts.find(
      (c) => deps.tokens.messages(contextView(state.messages, tryCut(c), new Map())) <= target - 800,
    ) ?? (cuts.at(-1) as number);
  // The summary's request stays well inside the budget, whatever the turns it reads (about 4 characters a token).
  const perMessage = Math.max(200, Math.min(MESSAGE_CHARS, Math.floor((state.budget * 1.6) / (cut - from))));
  const text = renderForSummary(state.messages.slice(from + 1, cut), from + 1, context, perMessage);
  const previous = context.summary ? `Earlier summary:\n${context.summary}\n\nThen:\n` : '';
  const reply = await deps.model.complete(
    {
      model: deps.modelName,
      messages: [
        { role: 'system', content: SUMMARISE },
        { role: 'user', content: `${previous}${text}` },
      ],
      tools: [],
    },
    { signal: deps.signal },
  );
  addUsage(state.usage, reply);
  const summary = (reply.content ?? '').slice(0, SUMMARY_CHARS);
  return { ...tryCut(cut), summary };
}

/** Messages as text for the summary's model call: roles, tool calls, results (stubbed ones by handle). */
function renderForSummary(
  messages: ChatCompletionMessageParam[],
  first: number,
  context: ThreadContext,
  perMessage: number,
) {
  const stubbed = new Set(context.stubbed ?? []);
  const cut = (s: string) => (s.length <= perMessage ? s : `${s.slice(0, perMessage)}… (cut)`);
  return messages
    .map((m, i) => {
      const at = first + i;
      if (m.role === 'tool')
        return stubbed.has(at)
          ? `tool result r${at}: (moved out; handle r${at})`
          : `tool result r${at}: ${cut(contentOf(m))}`;
      const calls =
        m.role === 'assistant' && m.tool_calls?.length
          ? ` [calls: ${m.tool_calls.map((c) => (c.type === 'function' ? `${c.function.name} ${cut(c.function.arguments)}` : c.type)).join('; ')}]`
          : '';
      return `${m.role}: ${cut(contentOf(m))}${calls}`;
    })
    .join('\n');
}
