import { describe, expect, it } from 'vitest';
import { type DelivererOptions, retryAt } from '../../../agent-server/webhooks/deliver.ts';

// When a failed webhook POST is tried again: exponential backoff with jitter, capped, and given up once the
// next try would come past AGENT_WEBHOOK_MAX_AGE_S after the POST was recorded.

const NOW = Date.parse('2026-11-29T08:00:00Z');
const opts = (random: number, maxAgeMs = 86_400_000) =>
  ({ now: () => NOW, random: () => random, maxAgeMs }) as DelivererOptions;
const recorded = new Date(NOW).toISOString();

describe('retryAt', () => {
  it('doubles the delay with each attempt, up to an hour, with ±25 % jitter', () => {
    const delays = [1, 2, 3, 4, 12, 20].map(
      (attempts) => (retryAt({ attempts, created_at: recorded }, opts(0.5)) as number) - NOW,
    );
    expect(delays).toEqual([5000, 10_000, 20_000, 40_000, 3_600_000, 3_600_000]);
    expect((retryAt({ attempts: 1, created_at: recorded }, opts(0)) as number) - NOW).toBe(3750);
    expect((retryAt({ attempts: 1, created_at: recorded }, opts(0.999_999)) as number) - NOW).toBe(6250);
  });

  it('gives up once the next try would come after the POST is too old', () => {
    const old = new Date(NOW - 86_400_000 + 4000).toISOString();
    expect(retryAt({ attempts: 1, created_at: old }, opts(0.5))).toBeUndefined();
    expect(retryAt({ attempts: 1, created_at: old }, opts(0))).toBeDefined();
  });
});
