import { createRequire } from 'node:module';
import type { Tiktoken } from 'js-tiktoken/lite';

// Token counting shared by the agent (what each model request costs) and the gateway (what a toolset
// change adds to or removes from the model's tools array), so both report the same numbers. A maintained
// tokenizer (js-tiktoken, OpenAI's BPE ranks); o200k_base by default, TOKENIZER to choose another.

/** The encodings that can be chosen with TOKENIZER. */
export const TOKENIZERS = ['o200k_base', 'cl100k_base', 'p50k_base', 'r50k_base', 'gpt2'] as const;
export type TokenizerName = (typeof TOKENIZERS)[number];

const require = createRequire(import.meta.url);
/** Loaded encoders, by name: a rank table takes about a second to load and never changes, so it loads once. */
const loaded = new Map<TokenizerName, Tiktoken>();

function encoder(name: TokenizerName): Tiktoken {
  let enc = loaded.get(name);
  if (!enc) {
    const { Tiktoken: Encoder } = require('js-tiktoken/lite') as typeof import('js-tiktoken/lite');
    const ranks = require(`js-tiktoken/ranks/${name}`);
    enc = new Encoder(ranks.default ?? ranks);
    loaded.set(name, enc);
  }
  return enc;
}

/** Text longer than this is counted on its first part and extrapolated: BPE on megabytes of text costs seconds. */
const EXACT_CHARS = 16 * 1024;

/**
 * BPE merges within one pre-token cost the square of its length, so one long run of letters or of symbols
 * (`xxxx…`, `=====…`) takes seconds. Such runs are counted in slices of this size: each cut can be off by a
 * token, and ordinary text, JSON and code have no such runs, so their counts stay exact.
 */
const LONGEST_RUN = 64;
/** One pre-token of o200k/cl100k longer than LONGEST_RUN: a run of letters, or of symbols (digits come in threes). */
const LONG_RUN = new RegExp(
  `[\\p{L}\\p{M}]{${LONGEST_RUN + 1},}|[^\\s\\p{L}\\p{N}]{${LONGEST_RUN + 1},}`,
  'gu',
);

/** Counts `s` with `enc`, slicing runs of more than LONGEST_RUN non-space characters. */
function encodeBounded(enc: Tiktoken, s: string): number {
  let n = 0;
  let from = 0;
  for (const m of s.matchAll(LONG_RUN)) {
    const start = m.index ?? 0;
    if (start > from) n += enc.encode(s.slice(from, start), 'all').length;
    for (let i = start; i < start + m[0].length; i += LONGEST_RUN) {
      n += enc.encode(s.slice(i, Math.min(i + LONGEST_RUN, start + m[0].length)), 'all').length;
    }
    from = start + m[0].length;
  }
  if (from < s.length) n += enc.encode(s.slice(from), 'all').length;
  return n;
}

/** A tool definition as a model receives it. */
export interface ToolDefinitionLike {
  name: string;
  description?: string;
  parameters?: unknown;
}

/** Counts tokens of text, of tool definitions and of chat messages, with caches for what repeats each step. */
export interface TokenCounter {
  readonly name: TokenizerName;
  text(text: string): number;
  /** One tool as an OpenAI function tool (`{type: "function", function: {name, description, parameters}}`). */
  tool(def: ToolDefinitionLike): number;
  /** A tools array: the sum of its tools. */
  tools(defs: readonly ToolDefinitionLike[]): number;
  /** A chat message list, with the per-message framing OpenAI documents (an estimate of the prompt). */
  messages(messages: readonly object[]): number;
}

/** Builds a counter; the encoder loads on first use (call `text('')` at start to load it early). */
export function createTokenCounter(name: TokenizerName = 'o200k_base'): TokenCounter {
  const toolCache = new Map<string, number>();
  // Message objects stay the same across a task's steps, so each is counted once.
  const messageCache = new WeakMap<object, number>();
  const text = (s: string): number => {
    if (s.length === 0) return 0;
    const enc = encoder(name);
    if (s.length <= EXACT_CHARS) return encodeBounded(enc, s);
    const head = encodeBounded(enc, s.slice(0, EXACT_CHARS));
    return Math.round((head * s.length) / EXACT_CHARS);
  };
  const tool = (def: ToolDefinitionLike): number => {
    const json = JSON.stringify({
      type: 'function',
      function: { name: def.name, description: def.description, parameters: def.parameters },
    });
    let n = toolCache.get(json);
    if (n === undefined) {
      n = text(json);
      if (toolCache.size > 5000) toolCache.clear();
      toolCache.set(json, n);
    }
    return n;
  };
  const message = (m: object): number => {
    let n = messageCache.get(m);
    if (n === undefined) {
      const { role, content, ...rest } = m as { role?: string; content?: unknown };
      n = 3 + text(role ?? '');
      n += typeof content === 'string' ? text(content) : content == null ? 0 : text(JSON.stringify(content));
      for (const [key, value] of Object.entries(rest)) {
        if (value !== undefined)
          n += text(key) + text(typeof value === 'string' ? value : JSON.stringify(value));
      }
      messageCache.set(m, n);
    }
    return n;
  };
  return {
    name,
    text,
    tool,
    tools: (defs) => defs.reduce((sum, d) => sum + tool(d), 0),
    messages: (list) => (list.length === 0 ? 0 : 3 + list.reduce((sum: number, m) => sum + message(m), 0)),
  };
}
