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

/** A rank file as js-tiktoken ships it: per line, a first token, its rank, then the tokens after it in base64. */
interface Ranks {
  pat_str: string;
  special_tokens: Record<string, number>;
  bpe_ranks: string;
}

/**
 * js-tiktoken's encoder with only what counting reads. Its constructor first expands the rank file into an
 * object of 200,000 properties and a decode table of 200,000 byte arrays (counting never decodes), and the
 * heap it grows to on the way stays resident: 80 MiB per thread that loads it. This builds the same rank map
 * (the key of a token is its bytes joined by commas, as the encoder looks them up) straight from the file's
 * lines; tests/lib/tokens.test.ts checks the counts against the library's own constructor.
 */
export function leanEncoder(ranks: Ranks): Tiktoken {
  const { Tiktoken: Encoder } = require('js-tiktoken/lite') as typeof import('js-tiktoken/lite');
  const rankMap = new Map<string, number>();
  let from = 0;
  const text = ranks.bpe_ranks;
  while (from < text.length) {
    let to = text.indexOf('\n', from);
    if (to === -1) to = text.length;
    const fields = text.slice(from, to).split(' ');
    from = to + 1;
    if (fields.length < 2) continue;
    const offset = Number.parseInt(fields[1], 10);
    for (let i = 2; i < fields.length; i++)
      rankMap.set(Buffer.from(fields[i], 'base64').join(','), offset + i - 2);
  }
  const textEncoder = new TextEncoder();
  return Object.assign(Object.create(Encoder.prototype) as Tiktoken, {
    patStr: ranks.pat_str,
    specialTokens: { ...ranks.special_tokens },
    inverseSpecialTokens: Object.fromEntries(
      Object.entries(ranks.special_tokens).map(([token, rank]) => [rank, textEncoder.encode(token)]),
    ),
    textEncoder,
    textDecoder: new TextDecoder('utf-8'),
    rankMap,
    textMap: new Map<number, Uint8Array>(),
  });
}

/** The rank file of an encoding. */
export function ranksOf(name: TokenizerName): Ranks {
  const ranks = require(`js-tiktoken/ranks/${name}`);
  return ranks.default ?? ranks;
}

function encoder(name: TokenizerName): Tiktoken {
  let enc = loaded.get(name);
  if (!enc) {
    enc = leanEncoder(ranksOf(name));
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

/** How many tokens a text is, as the encoder counts it. */
type Count = (s: string) => number;

/** The most distinct pre-tokens remembered (a few MiB); the memory starts over when it is full. */
const MAX_PIECES = 100_000;

/**
 * Counts text the way the encoder does — split into pre-tokens by its own pattern, each encoded on its own —
 * remembering each distinct pre-token's count. Words, JSON keys and punctuation recur from message to
 * message, and js-tiktoken re-encodes every one byte by byte, so this is several times faster with the same
 * result. Text holding a special token's opening (`<|`) goes through the encoder whole, as before.
 */
function pieceCounter(enc: Tiktoken): Count {
  const pattern = new RegExp((enc as unknown as { patStr: string }).patStr, 'gu');
  const pieces = new Map<string, number>();
  return (s) => {
    if (s.includes('<|')) return enc.encode(s, 'all').length;
    let n = 0;
    for (const m of s.matchAll(pattern)) {
      const piece = m[0];
      let c = pieces.get(piece);
      if (c === undefined) {
        c = enc.encode(piece, 'all').length;
        if (pieces.size >= MAX_PIECES) pieces.clear();
        pieces.set(piece, c);
      }
      n += c;
    }
    return n;
  };
}

/** Counts `s` with `count`, slicing runs of more than LONGEST_RUN non-space characters. */
function encodeBounded(count: Count, s: string): number {
  let n = 0;
  let from = 0;
  for (const m of s.matchAll(LONG_RUN)) {
    const start = m.index ?? 0;
    if (start > from) n += count(s.slice(from, start));
    for (let i = start; i < start + m[0].length; i += LONGEST_RUN) {
      n += count(s.slice(i, Math.min(i + LONGEST_RUN, start + m[0].length)));
    }
    from = start + m[0].length;
  }
  if (from < s.length) n += count(s.slice(from));
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
  // A definition object is counted once: the gateway's catalog and the agent's request builder hand out the
  // same objects step after step, and serialising a schema to look it up cost more than the lookup saved.
  const toolObjects = new WeakMap<object, number>();
  // Message objects stay the same across a task's steps, so each is counted once.
  const messageCache = new WeakMap<object, number>();
  // Texts that recur across tasks (the system prompt with the catalog, a repeated goal or result); kept only
  // up to a few KiB each, so the cache holds a few MiB at most.
  const longTexts = new Map<string, number>();
  let pieces: Count | undefined;
  const count = (s: string): number => {
    pieces ??= pieceCounter(encoder(name));
    if (s.length <= EXACT_CHARS) return encodeBounded(pieces, s);
    const head = encodeBounded(pieces, s.slice(0, EXACT_CHARS));
    return Math.round((head * s.length) / EXACT_CHARS);
  };
  const text = (s: string): number => {
    if (s.length === 0) return 0;
    if (s.length < 256 || s.length > 8192) return count(s);
    let n = longTexts.get(s);
    if (n === undefined) {
      n = count(s);
      if (longTexts.size >= 500) longTexts.clear();
      longTexts.set(s, n);
    }
    return n;
  };
  const tool = (def: ToolDefinitionLike): number => {
    const known = toolObjects.get(def);
    if (known !== undefined) return known;
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
    toolObjects.set(def, n);
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
