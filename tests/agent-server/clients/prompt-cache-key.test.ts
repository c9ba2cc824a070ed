import { HttpResponse, http } from 'msw';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openAIModel } from '../../../agent-server/clients/model.ts';
import { openAIResponsesModel } from '../../../agent-server/clients/model-responses.ts';
import { completion, MODEL_BASE_URL, modelEdge } from '../../helpers/msw.ts';
import { functionCall, message, response, scriptResponses } from '../../helpers/responses.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Tasks run through the loop against the model's HTTP edge: every request carries the task's thread as its
// prompt_cache_key (two tasks of one thread share it, another thread's differs), on chat completions and on
// the Responses API, where a tool call and its result also make the round trip as function_call items.

const server = modelEdge();
let stack: Stack | undefined;
afterEach(async () => {
  server.resetHandlers();
  await stack?.close();
  stack = undefined;
});
afterAll(() => server.close());

const OPTIONS = { baseURL: MODEL_BASE_URL, apiKey: 'test', timeoutMs: 5000, maxAttempts: 1 };
/** OpenAI's own API (msw answers it here): chat completions send prompt_cache_key to it alone. */
const OPENAI = 'https://api.openai.com/v1';

async function run(s: Stack, body: Record<string, unknown>) {
  const res = await s.post(s.agentApp, '/agent/execute_task', body);
  expect(res.body).toMatchObject({ status: 'completed' });
  return res.body as { thread_id: string; task_id: string };
}

describe('prompt_cache_key', () => {
  it('chat completions: each request carries its task’s thread, shared within a thread, not across', async () => {
    const keys: unknown[] = [];
    server.use(
      http.post(`${OPENAI}/chat/completions`, async ({ request }) => {
        keys.push(((await request.json()) as { prompt_cache_key?: unknown }).prompt_cache_key);
        return HttpResponse.json(completion({ content: 'done' }));
      }),
    );
    stack = await makeStack({
      model: openAIModel({ ...OPTIONS, baseURL: OPENAI }),
      toolsets: SPLIT_TOOLSETS,
    });
    const first = await run(stack, { goal: 'one' });
    const afterFirst = keys.length;
    const second = await run(stack, { goal: 'two', thread_id: first.thread_id });
    const afterSecond = keys.length;
    const other = await run(stack, { goal: 'three' });
    expect(second.thread_id).toBe(first.thread_id);
    expect(other.thread_id).not.toBe(first.thread_id);
    expect(afterFirst).toBeGreaterThan(0);
    expect(keys.slice(0, afterSecond)).toEqual(Array(afterSecond).fill(first.thread_id));
    expect(keys.slice(afterSecond)).toEqual(Array(keys.length - afterSecond).fill(other.thread_id));
  });

  it('Responses API: a task’s tool call and its result go back as function_call items, keyed by its thread', async () => {
    const edge = scriptResponses(server, [
      response([functionCall('call_1', 'manage_toolsets', { action: 'LIST' })]),
      response([message('Two toolsets.')]),
      response([message('Still two.')]),
    ]);
    stack = await makeStack({ model: openAIResponsesModel(OPTIONS), toolsets: SPLIT_TOOLSETS });
    const first = await run(stack, { goal: 'list the toolsets' });
    const second = await run(stack, { goal: 'and again?', thread_id: first.thread_id });
    expect(second).toMatchObject({ final_answer: 'Still two.' });
    expect(edge.invalid).toEqual([]);
    expect(edge.requests.map((r) => r.prompt_cache_key)).toEqual(Array(3).fill(first.thread_id));
    expect(edge.requests[0].instructions).toMatch(/manage_toolsets/);
    const calls = edge.requests[1].input.filter((i) => 'type' in i);
    expect(calls).toEqual([
      { type: 'function_call', call_id: 'call_1', name: 'manage_toolsets', arguments: '{"action":"LIST"}' },
      { type: 'function_call_output', call_id: 'call_1', output: expect.stringContaining('fs_read') },
    ]);
    // The second task's request extends the first task's last one: its answer, then the new goal.
    const last = edge.requests[1].input;
    expect(edge.requests[2].input.slice(0, last.length)).toEqual(last);
    expect(edge.requests[2].input.slice(last.length)).toEqual([
      { role: 'assistant', content: 'Two toolsets.' },
      { role: 'user', content: expect.stringContaining('and again?') },
    ]);
  });
});
