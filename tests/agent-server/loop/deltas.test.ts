import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { EventData } from '../../../agent-server/contract.ts';
import { DELTA_EVERY_MS, deltaSender } from '../../../agent-server/loop/deltas.ts';

// The streamed text's way out: gathered for DELTA_EVERY_MS, sent before the reply, a retried attempt's dropped.

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

function sender() {
  const sent: EventData['model_delta'][] = [];
  const s = deltaSender((_type, data) => sent.push(data), 3);
  return { s, sent };
}

describe('deltaSender', () => {
  it('sends what gathered once every DELTA_EVERY_MS, not a piece at a time', () => {
    const { s, sent } = sender();
    s.onDelta('a');
    s.onDelta('b');
    expect(sent).toEqual([]);
    vi.advanceTimersByTime(DELTA_EVERY_MS);
    s.onDelta('c');
    vi.advanceTimersByTime(DELTA_EVERY_MS - 1);
    s.onDelta('d');
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([
      { step: 3, attempt: 1, text: 'ab' },
      { step: 3, attempt: 1, text: 'cd' },
    ]);
  });

  it('sends the rest at once when the reply is in, and nothing after it is closed', () => {
    const { s, sent } = sender();
    s.onDelta('tail');
    s.flush();
    s.flush();
    expect(sent).toEqual([{ step: 3, attempt: 1, text: 'tail' }]);
    s.onDelta('late');
    s.close();
    vi.advanceTimersByTime(DELTA_EVERY_MS);
    expect(sent).toHaveLength(1);
  });

  it('drops the text of an attempt that is retried; the next attempt’s carries its number', () => {
    const { s, sent } = sender();
    s.onDelta('draft');
    s.retried();
    vi.advanceTimersByTime(DELTA_EVERY_MS);
    s.onDelta('final');
    s.flush();
    expect(sent).toEqual([{ step: 3, attempt: 2, text: 'final' }]);
  });
});
