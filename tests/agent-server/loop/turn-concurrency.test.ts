import { afterEach, describe, expect, it } from 'vitest';
import { startMcpHttpServer, text } from '../../helpers/mcp-http-server.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// Issue 32, item 4: how many calls one model turn may run at once. The loop runs a reply's tool calls one
// after the other (tool-step.ts: each is on record before it starts, and a resumed task starts again at the
// first call not finished), so a reply of twenty calls is never twenty calls in flight on a shared upstream.
// Shown on a real HTTP MCP server built with the SDK, whose tool counts the calls it is running at once.

let stack: Stack | undefined;
let server: Awaited<ReturnType<typeof startMcpHttpServer>> | undefined;
afterEach(async () => {
  await stack?.close();
  await server?.close();
  stack = undefined;
  server = undefined;
});

describe('one model turn with many tool calls', () => {
  it('runs them one at a time, in the order the model gave them, each answered', async () => {
    const executed: number[] = [];
    let running = 0;
    let most = 0;
    server = await startMcpHttpServer({
      tools: [
        {
          definition: {
            name: 'tick',
            description: 'Takes a moment',
            inputSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
          },
          run: async (args) => {
            executed.push(Number(args.n));
            running++;
            most = Math.max(most, running);
            // Long enough for a second call to arrive if the turn ran them side by side.
            await new Promise((r) => setTimeout(r, 30));
            running--;
            return text(`tick ${args.n}`);
          },
        },
      ],
    });
    const turn = Array.from({ length: 20 }, (_, n) => call('tick', { n }, `t${n}`));
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['ticks'] }, 'on')),
      calls(...turn),
      answer('ticked'),
    ]);
    stack = await makeStack({
      model,
      toolsets: {
        'ticks.yaml': `id: ticks
description: A tool that takes a moment.
variables: [TICKS_URL]
backend:
  mcp:
    url: \${TICKS_URL}
    protocol: legacy
`,
      },
      vars: { TICKS_URL: server.url },
    });
    const res = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'tick twenty times' });
    expect(res.body).toMatchObject({ status: 'completed', final_answer: 'ticked' });
    expect(executed).toEqual(Array.from({ length: 20 }, (_, n) => n));
    expect(most).toBe(1);
    // The model's next request carries every call's answer, in order.
    const tools = model.requests[2]?.messages.filter((m) => m.role === 'tool') ?? [];
    expect(tools.slice(-20).map((m) => m.content)).toEqual(
      Array.from({ length: 20 }, (_, n) => JSON.stringify(`tick ${n}`)),
    );
  }, 60_000);
});
