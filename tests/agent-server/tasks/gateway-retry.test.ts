import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createGatewayClient } from '../../../agent-server/clients/gateway.ts';
import { ridingOutages } from '../../../agent-server/tasks/gateway-retry.ts';
import { StoreUnavailable } from '../../../lib/db/reachability.ts';

// A task's gateway while the gateway's database is unreachable (agent-server/tasks/gateway-retry.ts), at the
// HTTP edge: the gateway answers 503 `store_unavailable` (its StoreUnavailable, as lib/http/http.ts sends it) a few
// times, then answers; any other failure is the caller's at once. On fake timers: the waits between tries
// (250 ms, doubling) pass at once, and "asks no more" is checked over a minute of the task's time.

const unavailable = () => {
  const err = new StoreUnavailable('PostgreSQL, DATABASE_URL', Date.now(), 'connect ECONNREFUSED');
  return new Response(JSON.stringify({ error: err.message, ...err.details }), {
    status: 503,
    headers: { 'content-type': 'application/json', ...err.headers },
  });
};

/** A gateway whose answers are `replies` in turn (the last repeated); what it was asked. */
function gateway(replies: (() => Response)[]) {
  const asked: string[] = [];
  const client = createGatewayClient({
    baseUrl: 'http://gateway.test',
    fetch: async (url, init) => {
      asked.push(`${init?.method} ${new URL(url).pathname}`);
      return (replies[asked.length - 1] ?? replies[replies.length - 1])();
    },
  });
  return { client, asked };
}

const ok = (body: unknown) => () =>
  new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** `pending`'s outcome once the timers it waits on have run. */
async function settled<T>(pending: Promise<T>): Promise<T> {
  pending.catch(() => undefined);
  await vi.runAllTimersAsync();
  return pending;
}

describe("a task's gateway through the gateway's database outage", () => {
  it('asks again while the gateway says its database is unreachable, then has the answer', async () => {
    const { client, asked } = gateway([unavailable, unavailable, ok({ session_id: 's', tools: [] })]);
    const waits: unknown[] = [];
    const riding = ridingOutages(client, new AbortController().signal, (err) => waits.push(err));
    const pending = riding.tools('s');
    // Not asked again before the first wait is over.
    await vi.advanceTimersByTimeAsync(200);
    expect(asked).toHaveLength(1);
    expect(await settled(pending)).toEqual([]);
    expect(asked).toEqual(['GET /mcp/tools', 'GET /mcp/tools', 'GET /mcp/tools']);
    // Said once per call that had to wait.
    expect(waits).toHaveLength(1);
  });

  it('rides it out as well through the same client marked as a script’s or as goal priming', async () => {
    const result = { success: true, result: 'read', execution_time_ms: 1 };
    for (const mark of ['scripted', 'priming'] as const) {
      const seen: (string | null)[] = [];
      const client = createGatewayClient({
        baseUrl: 'http://gateway.test',
        fetch: async (_url, init) => {
          seen.push(new Headers(init?.headers).get('x-toolshift-by-agent'));
          return (seen.length === 1 ? unavailable : ok(result))();
        },
      });
      const riding = ridingOutages(client, new AbortController().signal, () => {});
      expect(await settled(riding[mark]().callTool('s', 'read_text_file', { path: 'a' }))).toMatchObject({
        success: true,
      });
      expect(seen).toEqual(Array(2).fill(mark === 'scripted' ? 'run_code' : 'goal priming'));
    }
  });

  it('sends a tool call again only when the gateway refused it for its database (nothing ran)', async () => {
    const result = { success: true, result: 'read', execution_time_ms: 1 };
    const { client, asked } = gateway([unavailable, ok(result)]);
    const riding = ridingOutages(client, new AbortController().signal, () => {});
    expect(await settled(riding.callTool('s', 'read_text_file', { path: 'a' }))).toMatchObject({
      success: true,
    });
    expect(asked).toHaveLength(2);

    const failing = gateway([
      () => new Response(JSON.stringify({ error: 'Internal error' }), { status: 500 }),
      ok(result),
    ]);
    const once = ridingOutages(failing.client, new AbortController().signal, () => {});
    await expect(settled(once.callTool('s', 'read_text_file', { path: 'a' }))).rejects.toMatchObject({
      status: 500,
    });
    expect(failing.asked).toHaveLength(1);
  });

  it('stops asking when the task is stopped', async () => {
    const { client, asked } = gateway([unavailable]);
    const stop = new AbortController();
    const riding = ridingOutages(client, stop.signal, () => {});
    const pending = riding.listToolsets('s');
    pending.catch(() => undefined);
    await vi.advanceTimersByTimeAsync(250);
    expect(asked).toHaveLength(2);
    // Stopped in the middle of a wait: the wait ends at once, not when its timer would have.
    stop.abort(new Error('cancelled by a client'));
    await expect(pending).rejects.toThrow('cancelled by a client');
    const seen = asked.length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(asked).toHaveLength(seen);
    expect(vi.getTimerCount()).toBe(0);
  });
});
