import { describe, expect, it } from 'vitest';
import { paramsOf } from '../../agent-server/clients/anthropic-map.ts';
import {
  ANTHROPIC_PRICE,
  anthropicCache,
  anthropicCost,
  breakpointsOf,
  type CacheRequest,
} from '../../bench/provider-cost.ts';
import { breakpoints } from '../helpers/anthropic.ts';

// The bench's Anthropic cost: the cache modelled where the Anthropic client puts its breakpoints, read back
// where a later request's prefix matches, and priced as Anthropic prices writes and reads.

const tool = (name: string) => JSON.stringify({ type: 'function', function: { name } });
const msg = (role: string, content: string) => JSON.stringify({ role, content });

/** A request of two tools of 600 tokens, a system prompt, and the conversation's messages of 100 tokens each. */
function request(tools: string[], roles: string[]): CacheRequest {
  const messages = roles.map((r, i) => msg(r, `${r} ${i}`));
  return {
    units: [...tools, msg('system', 'sys'), ...messages],
    unitTokens: [...tools.map(() => 600), 200, ...messages.map(() => 100)],
    toolCount: tools.length,
    roles: ['system', ...roles],
  };
}

describe('the Anthropic cache model', () => {
  it('puts the breakpoints where the client does', () => {
    const r = request([tool('a'), tool('b')], ['user', 'assistant', 'tool', 'tool', 'assistant', 'tool']);
    // Units: tools 0–1, system 2, messages 3–8.
    expect(breakpointsOf(r)).toEqual([1, 2, 6, 8]);
    // The client's own request of the same shape marks the same places: the last tool, the system prompt, the
    // last two user turns.
    const params = paramsOf(
      {
        model: 'm',
        messages: [
          { role: 'system', content: 'sys' },
          { role: 'user', content: 'goal' },
          { role: 'assistant', content: null, tool_calls: [call('c1'), call('c2')] },
          { role: 'tool', tool_call_id: 'c1', content: 'r1' },
          { role: 'tool', tool_call_id: 'c2', content: 'r2' },
          { role: 'assistant', content: null, tool_calls: [call('c3')] },
          { role: 'tool', tool_call_id: 'c3', content: 'r3' },
        ],
        tools: ['a', 'b'].map((name) => ({ type: 'function', function: { name, parameters: {} } })),
      },
      100,
    );
    expect(breakpoints(params as never)).toEqual(['tools.1', 'system.0', 'messages.2.1', 'messages.4.0']);
  });

  it('a fixed tools array is read back; a changed one is written again', () => {
    const fixed = [tool('a'), tool('b')];
    const cache = anthropicCache([
      request(fixed, ['user']),
      request(fixed, ['user', 'assistant', 'tool']),
      request([tool('a'), tool('c')], ['user', 'assistant', 'tool', 'assistant', 'tool']),
    ]);
    // 1,500 tokens written first; then the first request's end read (1,500) and the new turn written (200).
    expect(cache[0]).toEqual({ read: 0, write: 1500 });
    expect(cache[1]).toEqual({ read: 1500, write: 200 });
    // Its second tool changed: the first tool alone is under 1,024 tokens and was never written; all is written anew.
    expect(cache[2]).toEqual({ read: 0, write: 1200 + 200 + 500 });
  });

  it('prices writes at 1.25× input and reads at 0.1×', () => {
    expect(ANTHROPIC_PRICE.cacheWritePerM / ANTHROPIC_PRICE.inputPerM).toBe(1.25);
    expect(ANTHROPIC_PRICE.cacheReadPerM / ANTHROPIC_PRICE.inputPerM).toBeCloseTo(0.1);
    expect(anthropicCost(1_000_000, 0)).toBeCloseTo(3);
    expect(anthropicCost(1_000_000, 0, { read: 1_000_000, write: 0 })).toBeCloseTo(0.3);
    expect(anthropicCost(1_000_000, 1_000_000, { read: 0, write: 1_000_000 })).toBeCloseTo(3.75 + 15);
  });
});

function call(id: string) {
  return { id, type: 'function' as const, function: { name: 'a', arguments: '{}' } };
}
