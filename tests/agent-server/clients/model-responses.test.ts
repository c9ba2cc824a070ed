import { HttpResponse } from 'msw';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { CompleteOptions, ModelRequest, RetryInfo } from '../../../agent-server/clients/model.ts';
import { openAIResponsesModel } from '../../../agent-server/clients/model-responses.ts';
import { MODEL_BASE_URL, modelEdge, streamed } from '../../helpers/msw.ts';
import {
  event,
  eventsOf,
  functionCall,
  message,
  response,
  type Scripted,
  scriptResponses,
  usage,
} from '../../helpers/responses.ts';

// The Responses API client at the HTTP edge: what it sends (each body checked against the schema written from
// the SDK's types), what it makes of each kind of reply, streamed or not, and the same retry policy and bounds
// as the chat client.

const server = modelEdge();
afterEach(() => server.resetHandlers());
afterAll(() => server.close());

const TOOL: ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'write_file',
    description: 'Writes a file.',
    parameters: { type: 'object', properties: { path: { type: 'string' } } },
  },
};

/** A conversation as the loop holds it: system prompt, goal, a reply with two calls and their results. */
const CONVERSATION: ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are toolshift.' },
  { role: 'user', content: 'write two files' },
  {
    role: 'assistant',
    content: 'Writing both.',
    tool_calls: [
      { id: 'call_a', type: 'function', function: { name: 'write_file', arguments: '{"path":"a"}' } },
      { id: 'call_b', type: 'function', function: { name: 'write_file', arguments: '{"path":"b"}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'call_a', content: 'wrote a' },
  { role: 'tool', tool_call_id: 'call_b', content: [{ type: 'text', text: 'wrote b' }] },
];

const request: ModelRequest = {
  model: 'test-model',
  messages: CONVERSATION,
  tools: [TOOL],
  cacheKey: 'thr_1',
};

function model(
  overrides: { stream?: boolean; maxReplyChars?: number; stallMs?: number; maxAttempts?: number } = {},
) {
  const sleeps: number[] = [];
  const m = openAIResponsesModel({
    baseURL: MODEL_BASE_URL,
    apiKey: 'test',
    timeoutMs: 5000,
    maxAttempts: 4,
    baseDelayMs: 100,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    ...overrides,
  });
  return { m, sleeps };
}

/** Calls the model over `script`, keeping what it heard and what it sent. */
async function ask(
  script: Scripted[],
  overrides: Parameters<typeof model>[0] = {},
  options: CompleteOptions = {},
) {
  const edge = scriptResponses(server, script);
  const { m, sleeps } = model(overrides);
  const deltas: string[] = [];
  const retries: RetryInfo[] = [];
  const reply = await m
    .complete(request, { ...options, onDelta: (t) => deltas.push(t), onRetry: (r) => retries.push(r) })
    .catch((err: Error) => err);
  expect(edge.invalid).toEqual([]);
  return { reply, deltas, retries, sleeps, requests: edge.requests };
}

function failing(status: number, headers: Record<string, string> = {}, error: Record<string, unknown> = {}) {
  return HttpResponse.json(
    { error: { message: `status ${status}`, type: 'test', ...error } },
    { status, headers: { 'x-should-retry': 'false', ...headers } },
  );
}

describe('the Responses API client', () => {
  it('sends the conversation statelessly: instructions, messages, calls and outputs by call_id, tools, the cache key', async () => {
    const { requests } = await ask([response([message('done')])]);
    expect(requests).toEqual([
      {
        model: 'test-model',
        instructions: 'You are toolshift.',
        input: [
          { role: 'user', content: 'write two files' },
          { role: 'assistant', content: 'Writing both.' },
          { type: 'function_call', call_id: 'call_a', name: 'write_file', arguments: '{"path":"a"}' },
          { type: 'function_call', call_id: 'call_b', name: 'write_file', arguments: '{"path":"b"}' },
          { type: 'function_call_output', call_id: 'call_a', output: 'wrote a' },
          { type: 'function_call_output', call_id: 'call_b', output: 'wrote b' },
        ],
        tools: [
          {
            type: 'function',
            name: 'write_file',
            description: 'Writes a file.',
            parameters: TOOL.type === 'function' ? TOOL.function.parameters : null,
            strict: false,
          },
        ],
        store: false,
        prompt_cache_key: 'thr_1',
      },
    ]);
  });

  it('sends no tools when the request has none, and no cache key when it has none', async () => {
    const edge = scriptResponses(server, [response([message('a summary')])]);
    const reply = await model().m.complete({
      model: 'test-model',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [],
    });
    expect(edge.invalid).toEqual([]);
    expect(edge.requests[0]).toEqual({
      model: 'test-model',
      input: [{ role: 'user', content: 'hi' }],
      store: false,
    });
    expect(reply.content).toBe('a summary');
  });

  it('reads text, several function calls (id = call_id), usage and cached tokens', async () => {
    const { reply } = await ask([
      response(
        [
          message('Reading both.'),
          functionCall('call_1', 'read_text_file', { path: 'a' }),
          functionCall('call_2', 'read_text_file', { path: 'b' }),
        ],
        { usage: usage(1200, 40, 1024) },
      ),
    ]);
    expect(reply).toMatchObject({
      content: 'Reading both.',
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'read_text_file', arguments: '{"path":"a"}' } },
        { id: 'call_2', type: 'function', function: { name: 'read_text_file', arguments: '{"path":"b"}' } },
      ],
      finish_reason: 'tool_calls',
      usage: { prompt_tokens: 1200, completion_tokens: 40, total_tokens: 1240 },
      cached_tokens: 1024,
      model: 'test-model',
      id: 'resp_test',
      attempts: 1,
    });
    expect(reply).not.toHaveProperty('usage_missing');
  });

  it('streams: the text heard as its deltas come, usage and cached tokens from the response’s end', async () => {
    const final = response([], { usage: usage(700, 5, 512) });
    const { reply, deltas, requests } = await ask(
      [{ events: eventsOf([{ text: ['The ', 'answer ', 'is ', '42.'] }], final) }],
      { stream: true },
    );
    expect(requests[0].stream).toBe(true);
    expect(deltas).toEqual(['The ', 'answer ', 'is ', '42.']);
    expect(reply).toMatchObject({
      content: 'The answer is 42.',
      tool_calls: [],
      finish_reason: 'stop',
      usage: { prompt_tokens: 700, completion_tokens: 5, total_tokens: 705 },
      cached_tokens: 512,
    });
  });

  it('streams several function calls, their arguments joined from their deltas', async () => {
    const events = eventsOf(
      [
        { text: ['Both at once.'] },
        { call: { id: 'call_1', name: 'write_file', args: ['{"pa', 'th":"a"}'] } },
        { call: { id: 'call_2', name: 'write_file', args: ['{"path"', ':"b"}'] } },
      ],
      response([]),
    );
    const { reply } = await ask([{ events }], { stream: true });
    expect(reply).toMatchObject({
      content: 'Both at once.',
      tool_calls: [
        { id: 'call_1', function: { name: 'write_file', arguments: '{"path":"a"}' } },
        { id: 'call_2', function: { name: 'write_file', arguments: '{"path":"b"}' } },
      ],
      finish_reason: 'tool_calls',
    });
  });

  it('takes the end event’s own output when it has one', async () => {
    const final = response([message('from the end event')]);
    const events = [
      event({ type: 'response.created', response: final }),
      event({ type: 'response.completed', response: final }),
    ];
    const { reply } = await ask([{ events }], { stream: true });
    expect(reply).toMatchObject({ content: 'from the end event', finish_reason: 'stop' });
  });

  it('says a reply cut off at max_output_tokens as finish_reason length, streamed or not', async () => {
    const cut = response([functionCall('call_1', 'write_file', { path: 'a' })], {
      status: 'incomplete',
      reason: 'max_output_tokens',
    });
    expect((await ask([cut])).reply).toMatchObject({ finish_reason: 'length' });
    const events = eventsOf(
      [{ call: { id: 'call_1', name: 'write_file', args: ['{"path":"a", "con'] } }],
      { ...cut, output: [] },
      'response.incomplete',
    );
    expect((await ask([{ events }], { stream: true })).reply).toMatchObject({
      finish_reason: 'length',
      tool_calls: [{ id: 'call_1', function: { arguments: '{"path":"a", "con' } }],
    });
  });

  it('says a refusal as the answer, streamed or not', async () => {
    const { reply } = await ask([response([message(null, 'I cannot help with that.')])]);
    expect(reply).toMatchObject({
      content: 'The model refused: I cannot help with that.',
      tool_calls: [],
      finish_reason: 'refusal',
    });
    const events = [
      event({ type: 'response.output_item.added', output_index: 0, item: message(null) }),
      event({
        type: 'response.refusal.delta',
        output_index: 0,
        item_id: 'msg_1',
        content_index: 0,
        delta: 'I cannot ',
      }),
      event({
        type: 'response.refusal.delta',
        output_index: 0,
        item_id: 'msg_1',
        content_index: 0,
        delta: 'do that.',
      }),
      event({ type: 'response.completed', response: response([]) }),
    ];
    const streamedReply = await ask([{ events }], { stream: true });
    expect(streamedReply.deltas).toEqual([]);
    expect(streamedReply.reply).toMatchObject({
      content: 'The model refused: I cannot do that.',
      finish_reason: 'refusal',
    });
  });

  it('retries a 429, waiting what retry-after asks', async () => {
    const { reply, sleeps, requests, retries } = await ask([
      failing(429, { 'retry-after': '2' }),
      response([message('ok')]),
    ]);
    expect(reply).toMatchObject({ content: 'ok', attempts: 2 });
    expect(requests).toHaveLength(2);
    expect(sleeps).toEqual([2000]);
    expect(retries[0]).toMatchObject({ attempt: 1, status: 429, delay_ms: 2000 });
    const streaming = await ask(
      [failing(429, { 'retry-after-ms': '30' }), { events: eventsOf([{ text: ['ok'] }], response([])) }],
      {
        stream: true,
      },
    );
    expect(streaming.reply).toMatchObject({ content: 'ok', attempts: 2 });
    expect(streaming.sleeps).toEqual([30]);
  });

  it('fails at once on an exhausted quota (a 429 that waiting does not fix)', async () => {
    const { reply, sleeps, requests } = await ask([
      failing(
        429,
        { 'retry-after': '1' },
        { message: 'You exceeded your current quota.', code: 'insufficient_quota' },
      ),
    ]);
    expect((reply as Error).message).toBe(
      `Model call failed: model endpoint ${MODEL_BASE_URL} answered 429: You exceeded your current quota.`,
    );
    expect(requests).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('fails at once on a 401, naming the key to check', async () => {
    const { reply, requests } = await ask([failing(401, {}, { message: 'Incorrect API key provided' })]);
    expect((reply as Error).message).toBe(
      `Model call failed: model endpoint ${MODEL_BASE_URL} answered 401: Incorrect API key provided ` +
        '(the endpoint refused the API key in OPENAI_API_KEY: check it, and that it may use this model)',
    );
    expect(requests).toHaveLength(1);
  });

  it('retries 5xx with growing backoff, then gives up after the attempt budget with the last error', async () => {
    const ok = await ask([failing(500), failing(503), response([message('ok')])]);
    expect(ok.reply).toMatchObject({ content: 'ok', attempts: 3 });
    expect(ok.sleeps).toHaveLength(2);
    expect(ok.sleeps[1]).toBeGreaterThan(ok.sleeps[0]);
    const { reply, requests } = await ask([failing(502), failing(502)], { maxAttempts: 2 });
    expect((reply as Error).message).toMatch(
      /^Model call failed after 2 attempts: model endpoint .* answered 502/,
    );
    expect(requests).toHaveLength(2);
  });

  it('refuses a reply past the size bound, streamed or not, without retrying it', async () => {
    const long = 'word '.repeat(40);
    const whole = await ask([response([message(long)])], { maxReplyChars: 100 });
    expect((whole.reply as Error).message).toContain('ran past 100 characters');
    expect(whole.requests).toHaveLength(1);
    const events = eventsOf([{ text: long.split(/(?<= )/) }], response([]));
    const stream = await ask([{ events }], { stream: true, maxReplyChars: 100 });
    expect((stream.reply as Error).message).toContain('ran past 100 characters');
    expect(stream.requests).toHaveLength(1);
    const args = eventsOf(
      [{ call: { id: 'c', name: 'write_file', args: ['x'.repeat(60), 'y'.repeat(60)] } }],
      response([]),
    );
    expect(
      ((await ask([{ events: args }], { stream: true, maxReplyChars: 100 })).reply as Error).message,
    ).toContain('ran past 100 characters');
  });

  it('retries a stream that sends an error event, a failed response, or ends before the response’s end', async () => {
    const { reply, retries } = await ask(
      [
        { events: [event({ type: 'error', code: 'server_error', message: 'overloaded', param: null })] },
        {
          events: [
            event({
              type: 'response.failed',
              response: {
                ...response([]),
                status: 'failed',
                error: { code: 'server_error', message: 'lost' },
              },
            }),
          ],
        },
        { events: eventsOf([{ text: ['Hel'] }], response([])).slice(0, -1) },
        { events: eventsOf([{ text: ['Hello'] }], response([])) },
      ],
      { stream: true },
    );
    expect(reply).toMatchObject({ content: 'Hello', attempts: 4 });
    expect(retries.map((r) => r.reason)).toEqual([
      `the model endpoint ${MODEL_BASE_URL} sent an error mid-stream: overloaded`,
      `the model endpoint ${MODEL_BASE_URL} sent an error mid-stream: lost`,
      `the model endpoint ${MODEL_BASE_URL} ended its stream before the reply was complete (no response.completed)`,
    ]);
  });

  it('abandons a stream that stalls, with the stall limit named', async () => {
    const held = streamed([event({ type: 'response.created', response: response([]) })], { hold: true });
    const { reply } = await ask([held], { stream: true, stallMs: 100, maxAttempts: 1 });
    expect((reply as Error).message).toMatch(/sent nothing for 100 ms mid-reply \(AGENT_MODEL_STALL_MS\)$/);
  });
});
