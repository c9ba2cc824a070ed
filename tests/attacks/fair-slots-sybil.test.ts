import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Listening, listen } from '../../lib/http/serve.ts';
import { startMcpHttpServer, text } from '../helpers/mcp-http-server.ts';
import { makeStack, type Stack } from '../helpers/stack.ts';

// Attack on issue 32 item 4 (fair per-session upstream slots). The fix shares a server's places between
// *sessions*; one MCP client (one credential, one connection) can mint as many sessions as it likes
// (manage_toolsets ACTIVATE without `session` returns a new handle each time, up to 10,000 per credential).
// With one call per handle it takes every place in flight and the whole bounded list of waiting sessions, and
// another session's call (a task's, over REST) is refused at once: the starvation item 4 was about, by a
// flood spread over many sessions instead of one.

const TOKENS = {
  admin: 'admin-token-sybil-xxxx',
  agent: 'agent-token-sybil-xxxx',
  mcp: 'mcp-token-sybil-xxxxxx',
};

let stack: Stack | undefined;
let upstream: Awaited<ReturnType<typeof startMcpHttpServer>> | undefined;
let gw: Listening | undefined;
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await gw?.close();
  await stack?.close();
  await upstream?.close();
});

const TOOLSET = `id: shared
description: A shared upstream with a slow tool.
timeout_seconds: 60
default: true
variables: [SHARED_URL]
backend:
  mcp:
    url: \${SHARED_URL}
    protocol: legacy
`;

const AGENT = { authorization: `Bearer ${TOKENS.agent}` };
type Result = { content?: { text: string }[]; isError?: boolean };

describe('fair upstream slots, flooded from many sessions of one MCP client', () => {
  it("a victim session's call is still served while one client floods through 12 handles", async () => {
    const holds: (() => void)[] = [];
    const executed: string[] = [];
    upstream = await startMcpHttpServer({
      tools: [
        {
          definition: {
            name: 'slow',
            description: 'Takes its time',
            inputSchema: { type: 'object', properties: { who: { type: 'string' } }, required: ['who'] },
          },
          run: async (args) => {
            executed.push(String(args.who));
            if (args.who !== 'victim') await new Promise<void>((r) => holds.push(r));
            return text(`done ${args.who}`);
          },
        },
      ],
    });
    // 2 places in flight, 1 per session: at most 4 × 2 = 8 sessions may wait.
    stack = await makeStack({
      toolsets: { 'shared.yaml': TOOLSET },
      vars: { SHARED_URL: upstream.url },
      tokens: TOKENS,
      connection: { maxConcurrentCalls: 2, maxCallsPerSession: 1 },
    });
    gw = await listen(stack.gatewayApp, 0, '127.0.0.1');
    const client = new Client(
      { name: 'sybil', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${TOKENS.mcp}` } },
      }),
    );
    clients.push(client);
    // One client, one credential: twelve sessions for the asking.
    const handles: string[] = [];
    for (let i = 0; i < 12; i++) {
      const res = (await client.callTool({
        name: 'manage_toolsets',
        arguments: { action: 'ACTIVATE', toolset_ids: ['shared'] },
      })) as Result;
      expect(res.isError, res.content?.[0]?.text).toBeFalsy();
      handles.push(JSON.parse(res.content?.[0]?.text as string).session);
    }
    expect(new Set(handles).size).toBe(12);
    // One slow call per handle: 2 run, up to 8 wait, the rest are refused.
    const flood = handles.map((session, i) =>
      client
        .callTool({ name: 'call_tool', arguments: { session, name: 'slow', arguments: { who: `h${i}` } } })
        .catch((e) => ({ isError: true, content: [{ text: String(e) }] })),
    );
    await vi.waitFor(() => expect(executed).toHaveLength(2), { timeout: 10_000 });
    // The rest of the flood reaches the gateway's queue (the first two already run there).
    await new Promise((r) => setTimeout(r, 150));

    // The victim: a task's session over the agent's REST route, one call.
    const s = stack;
    const on = await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      {
        action: 'ACTIVATE',
        toolset_ids: ['shared'],
        session_id: 'ses_victim',
      },
      AGENT,
    );
    expect(on.status).toBe(200);
    const victim = s.post(
      s.gatewayApp,
      '/mcp/tools/slow/call',
      {
        session_id: 'ses_victim',
        arguments: { who: 'victim' },
      },
      AGENT,
    );
    // Let the flood drain slowly, one held call at a time, so the victim has its turn if it waits.
    const drain = setInterval(() => holds.shift()?.(), 100);
    try {
      const answer = (await victim).body as { success: boolean; error?: string };
      // Attack fails (green) when the victim's call is served; red = refused at once ("busy").
      expect(answer.error ?? '').not.toMatch(/busy/);
      expect(answer.success).toBe(true);
      expect(executed).toContain('victim');
    } finally {
      await Promise.all(flood.map((p) => p.catch(() => undefined)));
      clearInterval(drain);
      for (const h of holds.splice(0)) h();
    }
  }, 60_000);
});
