import { afterEach, describe, expect, it, vi } from 'vitest';
import { startMcpHttpServer, text } from '../../helpers/mcp-http-server.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// Issue 32, item 4: one session's flood of parallel slow calls filled a shared HTTP upstream's places in
// flight and its whole queue, so every other session's call was refused at once. Shown through the gateway
// with a real Streamable HTTP MCP server built with the SDK: its `slow` tool records each execution and holds
// its answer until the test lets it go, so what the upstream ran, and when, is known exactly.

let stack: Stack | undefined;
let server: Awaited<ReturnType<typeof startMcpHttpServer>> | undefined;
afterEach(async () => {
  await stack?.close();
  await server?.close();
  stack = undefined;
  server = undefined;
});

const TOOLSET = `id: shared
description: A shared upstream with a slow tool.
timeout_seconds: 60
variables: [SHARED_URL]
backend:
  mcp:
    url: \${SHARED_URL}
    protocol: legacy
`;

/** The upstream: `slow` records {who, n} as it starts, then waits until the test releases that call. */
async function sharedUpstream() {
  const executed: string[] = [];
  const holds = new Map<string, () => void>();
  let running = 0;
  let most = 0;
  server = await startMcpHttpServer({
    tools: [
      {
        definition: {
          name: 'slow',
          description: 'Takes its time',
          inputSchema: {
            type: 'object',
            properties: { who: { type: 'string' }, n: { type: 'integer' }, hold: { type: 'boolean' } },
            required: ['who', 'n'],
          },
        },
        run: async (args) => {
          const id = `${args.who}:${args.n}`;
          executed.push(id);
          running++;
          most = Math.max(most, running);
          if (args.hold !== false) await new Promise<void>((resolve) => holds.set(id, resolve));
          running--;
          return text(`done ${id}`);
        },
      },
    ],
  });
  return {
    executed,
    mostAtOnce: () => most,
    /** Lets the held call `id` answer. */
    release(id: string) {
      const go = holds.get(id);
      if (!go) throw new Error(`${id} is not being held by the upstream`);
      holds.delete(id);
      go();
    },
    releaseAll() {
      for (const id of [...holds.keys()]) this.release(id);
    },
  };
}

async function gatewayWith(connection: { maxConcurrentCalls: number; maxCallsPerSession: number }) {
  const upstream = await sharedUpstream();
  stack = await makeStack({
    toolsets: { 'shared.yaml': TOOLSET },
    vars: { SHARED_URL: server?.url as string },
    connection,
  });
  const s = stack;
  for (const session of ['A', 'B']) {
    const on = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['shared'],
      session_id: session,
    });
    expect(on.status).toBe(200);
  }
  const call = (session: string, n: number, hold = true) =>
    s.post(s.gatewayApp, '/mcp/tools/slow/call', {
      session_id: session,
      arguments: { who: session, n, hold },
    });
  return { upstream, call };
}

describe('a shared upstream under one session flooding it', () => {
  it("serves another session's call while one session's 40 parallel calls flood it; the flood's excess is refused unrun", async () => {
    // 4 places in flight, at most 2 for one session, which may have 4 × 2 = 8 waiting.
    const { upstream, call } = await gatewayWith({ maxConcurrentCalls: 4, maxCallsPerSession: 2 });
    const answers = new Map<number, { success: boolean; result: unknown; error?: string }>();
    const flood = Array.from({ length: 40 }, (_, n) =>
      call('A', n).then((res) => {
        answers.set(n, res.body);
        return res;
      }),
    );
    // A's share reaches the upstream; its excess over its own queue is refused at once.
    await vi.waitFor(() => expect(answers.size).toBe(30), { timeout: 10_000 });
    await vi.waitFor(() => expect(upstream.executed).toHaveLength(2), { timeout: 10_000 });
    for (const answer of answers.values()) {
      expect(answer.success).toBe(false);
      expect(answer.error).toMatch(
        /this session already has 2 calls in flight and 8 waiting on it, its limit \(UPSTREAM_MAX_CALLS_PER_SESSION=2 in flight, 4 times as many waiting\); slow was not sent and did not run/,
      );
    }

    // B's one call is run by the upstream and answered while A's 2 are still held and 8 still wait.
    const victim = await call('B', 0, false);
    expect(victim.body).toMatchObject({ success: true, result: 'done B:0' });
    expect(upstream.executed).toContain('B:0');
    expect(upstream.executed.filter((id) => id.startsWith('A:'))).toHaveLength(2);
    expect(answers.size).toBe(30);

    // The flood drains: the upstream ran exactly A's ten accepted calls, never more than two of them at once.
    const drain = setInterval(() => upstream.releaseAll(), 20);
    try {
      const results = (await Promise.all(flood)).map((r) => r.body);
      const ran = results.flatMap((r, n) => (r.success ? [`A:${n}`] : []));
      expect(ran).toHaveLength(10);
      expect(results.filter((r) => r.success).every((r, i) => r.result === `done ${ran[i]}`)).toBe(true);
      expect(upstream.executed.filter((id) => id.startsWith('A:')).sort()).toEqual(ran.sort());
    } finally {
      clearInterval(drain);
    }
    expect(upstream.mostAtOnce()).toBeLessThanOrEqual(3);
  }, 60_000);

  it('gives a freed place to the waiting session with the fewest calls in flight, before the flood’s own queue', async () => {
    // A session may take every place while it is alone; then B waits, and is served first when one frees.
    const { upstream, call } = await gatewayWith({ maxConcurrentCalls: 3, maxCallsPerSession: 3 });
    const flood = Array.from({ length: 8 }, (_, n) => call('A', n));
    await vi.waitFor(() => expect(upstream.executed).toHaveLength(3), { timeout: 20_000 });
    const victim = call('B', 0, false);
    // Still waiting, behind A's five: every place is A's.
    const connection = stack?.gateway.upstream('shared');
    await vi.waitFor(() => expect(connection?.waiting).toBe(6), { timeout: 20_000 });
    expect(upstream.executed).not.toContain('B:0');
    upstream.release(upstream.executed[0] as string);
    // B runs fourth, ahead of A's five waiting calls.
    await vi.waitFor(() => expect(upstream.executed.length).toBeGreaterThanOrEqual(4), { timeout: 20_000 });
    expect(upstream.executed[3]).toBe('B:0');
    expect((await victim).body).toMatchObject({ success: true, result: 'done B:0' });
    const drain = setInterval(() => upstream.releaseAll(), 20);
    try {
      expect((await Promise.all(flood)).every((r) => r.body.success)).toBe(true);
    } finally {
      clearInterval(drain);
    }
    expect(upstream.executed.filter((id) => id.startsWith('A:'))).toHaveLength(8);
  }, 60_000);
});
