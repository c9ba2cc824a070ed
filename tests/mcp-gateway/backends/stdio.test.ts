import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HttpResponse, http } from 'msw';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openAIModel } from '../../../agent-server/clients/model.ts';
import { completion, MODEL_BASE_URL, modelEdge } from '../../helpers/msw.ts';
import { isAlive, waitFor } from '../../helpers/processes.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// Real MCP servers from npm over stdio (memory, sequential-thinking, everything) and one built in the test
// with the SDK v2 server (tests/fixtures/mcp/slow-server.mjs), driven through the gateway and the agent loop.

const edge = modelEdge();
afterAll(() => edge.close());
let stack: Stack | undefined;
afterEach(async () => {
  edge.resetHandlers();
  await stack?.close();
  stack = undefined;
});

const shipped = (name: string) => readFileSync(path.resolve('toolsets', name), 'utf8');
const SLOW_SERVER = path.resolve('tests/fixtures/mcp/slow-server.mjs');
const EVERYTHING = `id: everything
description: The MCP reference test server.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`;

type Body = { messages: { role: string; content: string; tool_call_id?: string }[]; tools: any[] };
const toolNames = (body: Body) => body.tools.map((t) => t.function.name);
const toolMessages = (body: Body) => body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
const pidOf = (s: Stack, label: string) => s.gateway.upstreams()[label]?.pid;

describe('stdio MCP servers from npm through the agent loop', () => {
  it('finds, activates, calls and dismisses memory and sequential_thinking (model mocked at the OpenAI edge)', async () => {
    const script = [
      { action: 'LIST', toolset_ids: [], query: 'remember that Ann prefers tea' },
      { action: 'ACTIVATE', toolset_ids: ['memory', 'sequential_thinking'] },
      null,
      null,
      { action: 'DEACTIVATE', toolset_ids: ['memory', 'sequential_thinking'] },
    ];
    const seen: Body[] = [];
    edge.use(
      http.post(`${MODEL_BASE_URL}/chat/completions`, async ({ request }) => {
        const body = (await request.json()) as Body;
        seen.push(body);
        const step = seen.length;
        const tool = (name: string, args: unknown) => ({
          id: `c${step}_${name}`,
          type: 'function',
          function: { name, arguments: JSON.stringify(args) },
        });
        if (step === 3) {
          return HttpResponse.json(
            completion({
              tool_calls: [
                tool('create_entities', {
                  entities: [{ name: 'Ann', entityType: 'person', observations: ['prefers tea'] }],
                }),
                tool('sequentialthinking', {
                  thought: 'Ann prefers tea, so offer tea.',
                  nextThoughtNeeded: false,
                  thoughtNumber: 1,
                  totalThoughts: 1,
                }),
              ],
            }),
          );
        }
        if (step === 4)
          return HttpResponse.json(completion({ tool_calls: [tool('search_nodes', { query: 'tea' })] }));
        const args = script[step - 1];
        if (args) return HttpResponse.json(completion({ tool_calls: [tool('manage_toolsets', args)] }));
        return HttpResponse.json(completion({ content: 'Noted: Ann prefers tea.' }));
      }),
    );
    stack = await makeStack({
      toolsets: {
        'memory.yaml': shipped('memory.yaml'),
        'sequential_thinking.yaml': shipped('sequential_thinking.yaml'),
      },
      model: openAIModel({ baseURL: MODEL_BASE_URL, apiKey: 'test', timeoutMs: 10_000, maxAttempts: 1 }),
    });
    // Nothing runs until a toolset is activated.
    expect(Object.values(stack.gateway.upstreams()).map((u) => u.state)).toEqual(['idle', 'idle']);
    const res = await stack.post(stack.agentApp, '/agent/execute_task', {
      goal: 'Remember that Ann prefers tea',
    });
    expect(res.body.status).toBe('completed');
    expect(res.body.final_answer).toBe('Noted: Ann prefers tea.');

    const listed = JSON.parse(toolMessages(seen[1])[0]);
    expect(listed.toolsets[0].id).toBe('memory');
    expect(toolNames(seen[0])).toEqual(['manage_toolsets']);
    expect(toolNames(seen[2])).toEqual(
      expect.arrayContaining(['manage_toolsets', 'create_entities', 'search_nodes', 'sequentialthinking']),
    );
    const [created, thought] = toolMessages(seen[3]).slice(-2);
    expect(JSON.parse(created)).toMatchObject({ entities: [{ name: 'Ann', observations: ['prefers tea'] }] });
    expect(JSON.parse(thought)).toMatchObject({ thoughtNumber: 1, nextThoughtNeeded: false });
    const found = toolMessages(seen[4]).at(-1) as string;
    expect(JSON.parse(found)).toMatchObject({ entities: [{ name: 'Ann', observations: ['prefers tea'] }] });
    expect(toolNames(seen[5])).toEqual(['manage_toolsets']);
    // The graph is in the memory server's file under the data directory, as the toolset file says.
    expect(await readFile(path.join(stack.dataDir, 'memory.jsonl'), 'utf8')).toContain('prefers tea');
  });
});

describe('a crashed or hung stdio server', () => {
  it('turns a server killed mid-call into an error result, shows it down, and restarts it on the next call', async () => {
    stack = await makeStack({ toolsets: { 'everything.yaml': EVERYTHING } });
    const { gateway } = stack;
    await gateway.changeToolsets({ action: 'ACTIVATE', toolset_ids: ['everything'], session_id: 's' });
    const first = pidOf(stack, 'mcp-server-everything stdio') as number;
    expect(isAlive(first)).toBe(true);
    const pending = gateway.callTool('s', 'trigger-long-running-operation', { duration: 30, steps: 30 });
    await new Promise((r) => setTimeout(r, 100));
    process.kill(first, 'SIGKILL');
    const failed = await pending;
    expect(failed.success).toBe(false);
    expect(failed.error).toMatch(
      /mcp-server-everything stdio stopped during the call to trigger-long-running-operation/,
    );
    expect(failed.error).toMatch(/killed by SIGKILL.*restarted on next use/);
    const listing = (await gateway.listToolsets('s')).toolsets[0];
    expect(listing).toMatchObject({ id: 'everything', health: 'down', active: true });
    expect(listing.health_reason).toMatch(/SIGKILL/);

    const again = await gateway.callTool('s', 'echo', { message: 'back' });
    expect(again).toMatchObject({ success: true, result: 'Echo: back' });
    const second = pidOf(stack, 'mcp-server-everything stdio') as number;
    expect(second).not.toBe(first);
    expect(gateway.upstreams()['mcp-server-everything stdio']).toMatchObject({ state: 'up', restarts: 1 });
  });

  it('times out a hung call, sends notifications/cancelled upstream, restarts a frozen server, and the task goes on', async () => {
    const tmp = await mkdtemp(path.join(tmpdir(), 'hang-'));
    const cancelLog = path.join(tmp, 'cancel.log');
    stack = await makeStack({
      toolsets: {
        'slow.yaml': `id: slow
description: A server that hangs.
timeout_seconds: 1
variables: [NODE]
backend:
  mcp:
    command: \${NODE}
    args: [${SLOW_SERVER}]
    env:
      CANCEL_LOG: ${cancelLog}
`,
      },
      vars: { NODE: process.execPath },
      connection: { livenessTimeoutMs: 500 },
      model: new ScriptedModel([
        calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['slow'] })),
        calls(call('wait', { label: 'first' })),
        calls(call('echo', { message: 'still here' })),
        calls(call('freeze', {})),
        calls(call('echo', { message: 'after the restart' })),
        answer('done'),
      ]),
    });
    const model = (await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'hang' })).body;
    expect(model.status).toBe('completed');
    const task = (await stack.get(stack.agentApp, `/agent/tasks/${model.task_id}`)).body;
    const outputs = task.events
      .filter((e: { type: string }) => e.type === 'tool_call')
      .map((e: { data: { name: string; ok: boolean; output: string } }) => [
        e.data.name,
        e.data.ok,
        e.data.output,
      ]);
    expect(outputs[0]).toEqual([
      'wait',
      false,
      expect.stringMatching(/wait did not finish within 1000 ms and was cancelled$/),
    ]);
    expect(outputs[1]).toEqual(['echo', true, '"echo: still here"']);
    expect(outputs[2]).toEqual([
      'freeze',
      false,
      expect.stringMatching(/no longer answers and will be restarted on next use/),
    ]);
    expect(outputs[3]).toEqual(['echo', true, '"echo: after the restart"']);
    // The server itself saw the cancellation, with the reason the client gave.
    const log = await waitFor(() => {
      try {
        return readFileSync(cancelLog, 'utf8');
      } catch {
        return undefined;
      }
    }, 'the cancellation to reach the server');
    expect(log).toMatch(/^cancelled first: .*timed out/);
    expect(Object.values(stack.gateway.upstreams())[0]).toMatchObject({ state: 'up', restarts: 1 });
    await rm(tmp, { recursive: true, force: true });
  });
});
