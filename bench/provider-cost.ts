import { createHash } from 'node:crypto';

// The cost per task at Anthropic's prices, on the same recorded requests the OpenAI figure uses (economics.ts).
// Anthropic's prompt cache is explicit: a request caches the prefix up to each of its `cache_control`
// breakpoints (a write, priced above input), and reads back the longest prefix an earlier request wrote (a
// read, priced at a tenth of input) when it ends within 20 blocks before one of its own breakpoints. The
// breakpoints are where toolshift's Anthropic client puts them (agent-server/clients/anthropic-map.ts): after
// the last tool, after the system prompt, after the last two user turns (the previous request's end and this
// one's). Tokens are counted with toolshift's tokenizer (o200k_base), an estimate of Claude's own.

/**
 * Anthropic's published prices for Claude Sonnet 4.5 per million tokens: input $3.00, a 5-minute cache write
 * 1.25× input ($3.75), a cache read 0.1× input ($0.30), output $15.00; a prompt prefix is cached from 1,024
 * tokens.
 */
export const ANTHROPIC_PRICE = {
  model: 'claude-sonnet-4-5',
  inputPerM: 3.0,
  cacheWritePerM: 3.75,
  cacheReadPerM: 0.3,
  outputPerM: 15.0,
  minCachedPrompt: 1024,
  /** How many blocks before a breakpoint the API looks for an earlier cache entry. */
  lookback: 20,
} as const;

/** One recorded request as the cache sees it: its units (tools, then messages) and their tokens. */
export interface CacheRequest {
  units: string[];
  unitTokens: number[];
  toolCount: number;
  /** The messages' roles, in order (units after the tools). */
  roles: string[];
}

/** The unit indexes a request's breakpoints close (inclusive), as the Anthropic client places them. */
export function breakpointsOf(r: CacheRequest): number[] {
  const at: number[] = [];
  if (r.toolCount > 0) at.push(r.toolCount - 1);
  let i = 0;
  while (r.roles[i] === 'system' || r.roles[i] === 'developer') i++;
  if (i > 0) at.push(r.toolCount + i - 1);
  // A user turn: a run of user and tool messages (the client merges them); it ends before an assistant message.
  const ends: number[] = [];
  for (let k = i; k < r.roles.length; k++) {
    if (r.roles[k] !== 'assistant' && (k + 1 === r.roles.length || r.roles[k + 1] === 'assistant')) {
      ends.push(r.toolCount + k);
    }
  }
  at.push(...ends.slice(-2));
  return at;
}

/** Each request's prompt tokens read from and written to the cache, the requests sent in order to one cache. */
export function anthropicCache(requests: readonly CacheRequest[]): { read: number; write: number }[] {
  const written = new Set<string>();
  return requests.map((r) => {
    const keys: string[] = [];
    const tokens: number[] = [];
    let hash = '';
    let sum = 0;
    for (const [i, unit] of r.units.entries()) {
      hash = createHash('sha256').update(hash).update('\n').update(unit).digest('hex');
      sum += r.unitTokens[i] ?? 0;
      keys.push(hash);
      tokens.push(sum);
    }
    const marks = breakpointsOf(r);
    let read = 0;
    for (const bp of marks) {
      for (let p = bp; p >= 0 && p >= bp - ANTHROPIC_PRICE.lookback; p--) {
        if (written.has(keys[p] as string)) {
          read = Math.max(read, tokens[p] as number);
          break;
        }
      }
    }
    const last = Math.max(-1, ...marks);
    const upTo = last >= 0 ? (tokens[last] as number) : 0;
    let write = 0;
    if (upTo >= ANTHROPIC_PRICE.minCachedPrompt) {
      write = Math.max(0, upTo - read);
      for (const bp of marks) {
        if ((tokens[bp] as number) >= ANTHROPIC_PRICE.minCachedPrompt) written.add(keys[bp] as string);
      }
    }
    return { read, write };
  });
}

/** A request's cost at Anthropic's prices: its input split into uncached, written and read, and its output. */
export function anthropicCost(input: number, output: number, cache = { read: 0, write: 0 }): number {
  const p = ANTHROPIC_PRICE;
  const plain = Math.max(0, input - cache.read - cache.write);
  return (
    (plain * p.inputPerM +
      cache.write * p.cacheWritePerM +
      cache.read * p.cacheReadPerM +
      output * p.outputPerM) /
    1e6
  );
}
