import type { TokenCounter } from '../lib/telemetry/tokens.ts';
import type { RecordedRequest, ScriptedTurn } from './mock-model.ts';
import { anthropicCache, anthropicCost } from './provider-cost.ts';
import { ARMS, type Arm } from './tasks.ts';

// Figures 1–4 from the requests the mock model received: tool-definition tokens per request, input tokens and
// model calls per task, prompt-prefix stability between consecutive requests, and the cost per task with a
// provider's prompt cache. Every number comes from the bytes that were sent, counted with toolshift's own
// tokenizer (lib/telemetry/tokens.ts, o200k_base).

/**
 * The published price the cost estimate uses: OpenAI's API prices for gpt-4.1 per million tokens (input
 * $2.00, cached input $0.50 — a 75% discount — output $8.00). OpenAI caches a prompt's prefix automatically
 * once the prompt is at least 1,024 tokens long, in increments of 128 tokens.
 */
export const PRICE = {
  model: 'gpt-4.1',
  inputPerM: 2.0,
  cachedInputPerM: 0.5,
  outputPerM: 8.0,
  minCachedPrompt: 1024,
  cacheIncrement: 128,
} as const;

/** One request, measured. */
interface Measured {
  arm: Arm;
  task: string;
  turn: number;
  toolTokens: number;
  messageTokens: number;
  /** Tokens of tool definitions carried inside messages (dispatch and code: activation results). */
  definitionsInMessages: number;
  outputTokens: number;
  /** Serialised in the provider's order: tools, then messages, one JSON value per line. */
  units: string[];
  unitTokens: number[];
  toolCount: number;
  roles: string[];
  text: string;
  /** Whether the reply to the previous request changed toolsets. */
  afterToggle: boolean;
  cachedTokens: number;
}

/** The figures of one arm. */
export interface ArmFigures {
  arm: Arm;
  tasks: number;
  requests: number;
  /** Mean tool-definition tokens per model request (the `tools` array). */
  toolTokensPerRequest: number;
  /** Mean tokens of tool definitions carried in messages per task (dispatch, code). */
  definitionsInMessagesPerTask: number;
  inputTokensPerTask: number;
  modelCallsPerTask: number;
  /** Mean share of the previous request's bytes that prefix the next: steps without a toggle, with one, all. */
  prefixSteady: number | null;
  prefixToggle: number | null;
  prefixAll: number | null;
  prefixSteadyMin: number | null;
  cachedShare: number;
  costPerTask: number;
  costPerTaskUncached: number;
  /** Each task's input tokens, by its key (where an arm's cost goes). */
  inputTokensByTask?: Record<string, number>;
  outputTokensPerTask: number;
  /** The same requests at Anthropic's prices, its cache as toolshift's Anthropic client marks it (provider-cost.ts). */
  anthropic?: ProviderCost;
}

/** An arm's cost at one provider's prices: with its prompt cache and without, and the share read and written. */
export interface ProviderCost {
  costPerTask: number;
  costPerTaskUncached: number;
  cacheReadShare: number;
  cacheWriteShare: number;
}

const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/** Tokens a cache would serve for a prefix of `prefix` tokens of a `total`-token prompt (OpenAI's rule). */
function cacheable(prefix: number, total: number): number {
  if (total < PRICE.minCachedPrompt || prefix < PRICE.minCachedPrompt) return 0;
  return (
    PRICE.minCachedPrompt +
    Math.floor((prefix - PRICE.minCachedPrompt) / PRICE.cacheIncrement) * PRICE.cacheIncrement
  );
}

/** What one request's reply was, to know whether it toggled toolsets and how many tokens it produced. */
function replyOf(script: ScriptedTurn[] | undefined, turn: number): { toggle: boolean; text: string } {
  const t = script?.[turn];
  if (!t) return { toggle: false, text: '' };
  if ('answer' in t) return { toggle: false, text: t.answer };
  const toggle = t.calls.some(
    (c) => c.name === 'manage_toolsets' && ['ACTIVATE', 'DEACTIVATE'].includes(String(c.arguments.action)),
  );
  return { toggle, text: JSON.stringify(t.calls.map((c) => ({ name: c.name, arguments: c.arguments }))) };
}

/** Where an activation's result in code mode turns from its JSON to the TypeScript declarations. */
const DECLARATIONS = '}\n\n// toolset ';

/**
 * Tokens of tool definitions a message carries: an activation's result in dispatch mode (JSON definitions,
 * `tools`) or in code mode (TypeScript declarations after the result's JSON).
 */
function definitionTokens(m: { role: string; content?: unknown }, counter: TokenCounter): number {
  if (m.role !== 'tool' || typeof m.content !== 'string') return 0;
  const text = m.content;
  const at = text.indexOf(DECLARATIONS);
  if (text.startsWith('{') && at > 0) return counter.text(text.slice(at + 3));
  if (!text.includes('"tools":[{')) return 0;
  let result: { tools?: { name: string }[] };
  try {
    result = JSON.parse(text);
  } catch {
    // A result in plain text (run_code's printed lines) that merely quotes such a field.
    return 0;
  }
  return counter.tools(result.tools ?? []);
}

/** Measures every recorded request of the arms' runs; `scripts` maps a request key to its task's script. */
export function economics(
  requests: readonly RecordedRequest[],
  scripts: Map<string, ScriptedTurn[]>,
  counter: TokenCounter,
): ArmFigures[] {
  const measured: Measured[] = [];
  for (const r of requests) {
    const [arm, task] = r.key.split(':') as [Arm, string];
    const body = JSON.parse(r.body) as {
      tools?: { type: string; function: { name: string; description?: string; parameters?: unknown } }[];
      messages: { role: string; content?: unknown }[];
    };
    const tools = body.tools ?? [];
    const script = scripts.get(r.key);
    const units = [...tools.map((t) => JSON.stringify(t)), ...body.messages.map((m) => JSON.stringify(m))];
    const unitTokens = [
      ...tools.map((t) => counter.tool(t.function)),
      ...body.messages.map((m) => counter.messages([m]) - 3),
    ];
    const definitionsInMessages = body.messages.reduce((sum, m) => sum + definitionTokens(m, counter), 0);
    measured.push({
      arm,
      task,
      turn: r.turn,
      toolTokens: counter.tools(tools.map((t) => t.function)),
      messageTokens: counter.messages(body.messages),
      definitionsInMessages,
      outputTokens: counter.text(replyOf(script, r.turn).text),
      units,
      unitTokens,
      toolCount: tools.length,
      roles: body.messages.map((m) => m.role),
      text: units.join('\n'),
      afterToggle: r.turn > 0 && replyOf(script, r.turn - 1).toggle,
      cachedTokens: 0,
    });
  }
  // The arms that ran, in the order they are reported.
  return ARMS.filter((arm) => measured.some((m) => m.arm === arm)).map((arm) =>
    figuresOf(
      measured.filter((m) => m.arm === arm),
      arm,
    ),
  );
}

function figuresOf(ms: Measured[], arm: Arm): ArmFigures {
  // A warm cache: each request may reuse the longest prefix of whole units it shares with any earlier
  // request of the same arm (the tasks run one after another, well within a cache's lifetime).
  for (let i = 0; i < ms.length; i++) {
    let best = 0;
    for (let j = 0; j < i; j++) {
      const a = ms[i].units;
      const b = ms[j].units;
      let k = 0;
      while (k < a.length && k < b.length && a[k] === b[k]) k++;
      best = Math.max(best, k);
    }
    const prefixTokens = ms[i].unitTokens.slice(0, best).reduce((s, n) => s + n, 0);
    ms[i].cachedTokens = cacheable(prefixTokens, ms[i].toolTokens + ms[i].messageTokens);
  }
  const tasks = [...new Set(ms.map((m) => m.task))];
  const byTask = tasks.map((t) => ms.filter((m) => m.task === t).sort((a, b) => a.turn - b.turn));
  const steady: number[] = [];
  const toggle: number[] = [];
  for (const list of byTask) {
    for (let i = 1; i < list.length; i++) {
      const share = commonPrefix(list[i - 1].text, list[i].text) / list[i - 1].text.length;
      (list[i].afterToggle ? toggle : steady).push(share);
    }
  }
  const input = (m: Measured) => m.toolTokens + m.messageTokens;
  const cost = (m: Measured, cached: boolean) => {
    const c = cached ? m.cachedTokens : 0;
    return (
      ((input(m) - c) * PRICE.inputPerM + c * PRICE.cachedInputPerM + m.outputTokens * PRICE.outputPerM) / 1e6
    );
  };
  const sum = (f: (m: Measured) => number) => ms.reduce((s, m) => s + f(m), 0);
  const n = tasks.length;
  return {
    arm,
    tasks: n,
    requests: ms.length,
    toolTokensPerRequest: sum((m) => m.toolTokens) / ms.length,
    definitionsInMessagesPerTask:
      byTask.reduce((s, list) => s + (list.at(-1)?.definitionsInMessages ?? 0), 0) / n,
    inputTokensPerTask: sum(input) / n,
    modelCallsPerTask: ms.length / n,
    prefixSteady: mean(steady),
    prefixToggle: mean(toggle),
    prefixAll: mean([...steady, ...toggle]),
    prefixSteadyMin: steady.length > 0 ? Math.min(...steady) : null,
    cachedShare: sum((m) => m.cachedTokens) / sum(input),
    costPerTask: sum((m) => cost(m, true)) / n,
    costPerTaskUncached: sum((m) => cost(m, false)) / n,
    outputTokensPerTask: sum((m) => m.outputTokens) / n,
    anthropic: anthropicFigures(ms, n),
    inputTokensByTask: Object.fromEntries(
      byTask.map((list) => [list[0].task, list.reduce((s, m) => s + input(m), 0)]),
    ),
  };
}

/** The arm's requests at Anthropic's prices, sent in the order they were (a warm cache across its tasks). */
function anthropicFigures(ms: Measured[], tasks: number): ProviderCost {
  const cache = anthropicCache(ms);
  const input = (m: Measured) => m.toolTokens + m.messageTokens;
  const total = ms.reduce((s, m) => s + input(m), 0);
  let cached = 0;
  let uncached = 0;
  let read = 0;
  let write = 0;
  for (const [i, m] of ms.entries()) {
    const c = cache[i] ?? { read: 0, write: 0 };
    cached += anthropicCost(input(m), m.outputTokens, c);
    uncached += anthropicCost(input(m), m.outputTokens);
    read += c.read;
    write += c.write;
  }
  return {
    costPerTask: cached / tasks,
    costPerTaskUncached: uncached / tasks,
    cacheReadShare: read / total,
    cacheWriteShare: write / total,
  };
}
