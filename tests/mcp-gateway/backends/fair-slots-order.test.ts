import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import { FairSlots } from '../../../mcp-gateway/backends/fair-slots.ts';
import { UpstreamError } from '../../../mcp-gateway/backends/upstream-types.ts';

// The order in which FairSlots hands out a backend's places, and its bounds, shown on the scheduler itself
// (fair-slots.test.ts shows the effect through the gateway on a real upstream).

/** Takes a place for `session` and records, once it is granted, that `label` started. */
function take(slots: FairSlots, session: string, label: string, started: string[], timeoutMs = 10_000) {
  return slots.acquire(session, 'tool', timeoutMs).then((release) => {
    started.push(label);
    return release;
  });
}

describe('FairSlots', () => {
  it('serves waiting sessions in turn, not in the order their calls came', async () => {
    const slots = new FairSlots({ label: 'srv', slots: 1, perSession: 1 });
    const started: string[] = [];
    const holder = await take(slots, 'X', 'x', started);
    const a1 = take(slots, 'A', 'a1', started);
    const a2 = take(slots, 'A', 'a2', started);
    const b1 = take(slots, 'B', 'b1', started);
    holder();
    (await a1)();
    (await b1)();
    (await a2)();
    // In arrival order it would have been a1, a2, b1.
    expect(started).toEqual(['x', 'a1', 'b1', 'a2']);
    expect(slots.running).toBe(0);
    expect(slots.waiting).toBe(0);
  });

  it('puts a session whose call just ran behind one that has waited, though it queued first', async () => {
    const slots = new FairSlots({ label: 'srv', slots: 1, perSession: 1 });
    const started: string[] = [];
    const a1 = await take(slots, 'A', 'a1', started);
    const a2 = take(slots, 'A', 'a2', started);
    const b1 = take(slots, 'B', 'b1', started);
    a1();
    (await b1)();
    (await a2)();
    expect(started).toEqual(['a1', 'b1', 'a2']);
  });

  it('bounds the sessions that may queue: past four times the places, a new session is refused at once, unrun', async () => {
    const slots = new FairSlots({ label: 'srv', slots: 1, perSession: 1 });
    const started: string[] = [];
    const holder = await take(slots, 'X', 'x', started);
    const queued = ['s1', 's2', 's3', 's4'].map((s) => take(slots, s, s, started));
    const refused = take(slots, 's5', 's5', started);
    await expect(refused).rejects.toThrow(UpstreamError);
    await expect(refused).rejects.toThrow(
      /srv is busy: calls of 4 other sessions are waiting for it, the most that may \(4 times UPSTREAM_MAX_CONCURRENT_CALLS=1\); tool was not sent and did not run/,
    );
    // A session already queued may still add to its own queue.
    const more = take(slots, 's1', 's1 again', started);
    expect(slots.waiting).toBe(5);
    holder();
    for (const q of [...queued, more]) (await q)();
    expect(started).toEqual(['x', 's1', 's2', 's3', 's4', 's1 again']);
  });

  it('a call that waits out its time leaves its queue, is not started, and says so with its own timeout', async () => {
    const slots = new FairSlots({ label: 'srv', slots: 1, perSession: 1 });
    const started: string[] = [];
    const holder = await take(slots, 'X', 'x', started);
    await expect(take(slots, 'A', 'late', started, 100)).rejects.toThrow(
      'srv: tool waited 100 ms for one of the 1 calls in flight to finish and was not sent',
    );
    expect(slots.waiting).toBe(0);
    const next = take(slots, 'B', 'b', started);
    holder();
    (await next)();
    expect(started).toEqual(['x', 'b']);
    // Held back by its own share rather than by the server: said so.
    const wide = new FairSlots({ label: 'srv', slots: 4, perSession: 1 });
    const own = await take(wide, 'A', 'a', started);
    await expect(take(wide, 'A', 'a late', started, 100)).rejects.toThrow(
      "srv: tool waited 100 ms for one of this session's 1 calls in flight (UPSTREAM_MAX_CALLS_PER_SESSION) to finish and was not sent",
    );
    own();
  });

  it('never lets one session hold more than its share, even with places free', async () => {
    const slots = new FairSlots({ label: 'srv', slots: 4, perSession: 2 });
    const started: string[] = [];
    const a = [0, 1, 2].map((n) => take(slots, 'A', `a${n}`, started));
    const b = await take(slots, 'B', 'b', started);
    expect(started).toEqual(['a0', 'a1', 'b']);
    expect(slots.running).toBe(3);
    (await a[0])();
    (await a[2])();
    (await a[1])();
    b();
    expect(started).toEqual(['a0', 'a1', 'b', 'a2']);
    expect(slots.running).toBe(0);
  });

  it('takes its limits from the configuration: a session never more than the server, a bad value named', () => {
    const upstream = (env: Record<string, string>) => loadConfig(env).gateway.upstream;
    expect(upstream({})).toMatchObject({ maxConcurrentCalls: 16, maxCallsPerSession: 8 });
    expect(
      upstream({ UPSTREAM_MAX_CONCURRENT_CALLS: '4', UPSTREAM_MAX_CALLS_PER_SESSION: '8' }),
    ).toMatchObject({ maxConcurrentCalls: 4, maxCallsPerSession: 4 });
    expect(() => upstream({ UPSTREAM_MAX_CALLS_PER_SESSION: '0' })).toThrow(/UPSTREAM_MAX_CALLS_PER_SESSION/);
  });
});
