import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { anthropicModel } from '../../../agent-server/clients/model-anthropic.ts';
import { loadConfig } from '../../../lib/config/config.ts';
import { readyLine } from '../../../start/stack.ts';
import {
  ANTHROPIC_BASE_URL,
  apiError,
  breakpoints,
  messageBody,
  type ScriptedReply,
  scriptAnthropic,
  sse,
  streamEvents,
  text,
  toolUse,
} from '../../helpers/anthropic.ts';
import { modelEdge } from '../../helpers/msw.ts';

// The Anthropic Messages client at its HTTP edge: every request checked against the API's request schema (from
// the SDK's types) and rules, every kind of reply and failure, with and without streaming.

const server = modelEdge();
afterEach(() => server.resetHandlers());
afterAll(() => server.close());

function model(o: { stream?: boolean; maxAttempts?: number; maxReplyChars?: number; apiKey?: string } = {}) {
  const sleeps: number[] = [];
  const m = anthropicModel({
    baseURL: ANTHROPIC_BASE_URL,
    apiKey: 'apiKey' in o ? o.apiKey : 'sk-ant-test',
    timeoutMs: 5000,
    maxAttempts: o.maxAttempts ?? 4,
    baseDelayMs: 100,
    stream: o.stream,
    maxReplyChars: o.maxReplyChars,
    maxTokens: 1024,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
  return { m, sleeps };
}

const TOOLS: ChatCompletionTool[] = ['read_text_file', 'write_file'].map((name) => ({
  type: 'function',
  function: {
    name,
    description: `${name} does it`,
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  },
}));
const first: ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are toolshift.' },
  { role: 'user', content: 'read a.txt' },
];
const second: ChatCompletionMessageParam[] = [
  ...first,
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      {
        id: 'toolu_1',
        type: 'function',
        function: { name: 'read_text_file', arguments: '{"path":"a.txt"}' },
      },
    ],
  },
  { role: 'tool', tool_call_id: 'toolu_1', content: '{"content":"hello"}' },
];
const request = (messages: ChatCompletionMessageParam[], tools = TOOLS) => ({
  model: 'claude-test',
  messages,
  tools,
});

const cacheUsage = {
  input_tokens: 40,
  output_tokens: 12,
  cache_read_input_tokens: 900,
  cache_creation_input_tokens: 60,
};

describe.each([false, true])('the Anthropic client (streaming %s)', (stream) => {
  it('sends a valid request with its breakpoints and maps a text reply, its usage and cached tokens', async () => {
    const edge = scriptAnthropic(server, [text('It says hello.', cacheUsage)]);
    const deltas: string[] = [];
    const reply = await model({ stream }).m.complete(request(second), { onDelta: (t) => deltas.push(t) });
    expect(edge.invalid).toEqual([]);
    const [sent] = edge.requests;
    expect(sent).toMatchObject({ model: 'claude-test', max_tokens: 1024, stream });
    expect(sent?.system).toEqual([
      { type: 'text', text: 'You are toolshift.', cache_control: { type: 'ephemeral' } },
    ]);
    expect(sent?.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(sent?.messages[1]?.content).toEqual([
      { type: 'tool_use', id: 'toolu_1', name: 'read_text_file', input: { path: 'a.txt' } },
    ]);
    // After the tools, after the system prompt, after the previous request's last turn and this one's.
    expect(breakpoints(sent as never)).toEqual(['tools.1', 'system.0', 'messages.0.0', 'messages.2.0']);
    // The SDK's credential and API version headers (version 1.10 sends the key as a bearer token).
    expect(edge.headers[0]?.get('authorization')).toBe('Bearer sk-ant-test');
    expect(edge.headers[0]?.get('anthropic-version')).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(reply).toMatchObject({
      content: 'It says hello.',
      tool_calls: [],
      finish_reason: 'stop',
      usage: { prompt_tokens: 1000, completion_tokens: 12, total_tokens: 1012 },
      cached_tokens: 900,
      cache_write_tokens: 60,
      model: 'claude-test',
      id: 'msg_test',
      attempts: 1,
    });
    expect(deltas.join('')).toBe(stream ? 'It says hello.' : '');
  });

  it('maps tool_use blocks to tool calls with their ids (streamed: input_json_delta pieces joined)', async () => {
    const edge = scriptAnthropic(server, [
      {
        content: [
          { type: 'text', text: 'Reading both.' },
          { type: 'tool_use', id: 'toolu_a', name: 'read_text_file', input: { path: 'a.txt' } },
          {
            type: 'tool_use',
            id: 'toolu_b',
            name: 'read_text_file',
            input: { path: 'dir/b with spaces.txt' },
          },
        ],
        stop_reason: 'tool_use',
      },
    ]);
    const reply = await model({ stream }).m.complete(request(first));
    expect(edge.invalid).toEqual([]);
    expect(reply.finish_reason).toBe('tool_calls');
    expect(reply.content).toBe('Reading both.');
    expect(reply.tool_calls).toEqual([
      {
        id: 'toolu_a',
        type: 'function',
        function: { name: 'read_text_file', arguments: '{"path":"a.txt"}' },
      },
      {
        id: 'toolu_b',
        type: 'function',
        function: { name: 'read_text_file', arguments: '{"path":"dir/b with spaces.txt"}' },
      },
    ]);
  });

  it('a reply cut off at max_tokens is finish_reason length, so the loop asks again', async () => {
    scriptAnthropic(server, [
      { ...toolUse('toolu_c', 'write_file', { path: 'x' }), stop_reason: 'max_tokens' },
    ]);
    const reply = await model({ stream }).m.complete(request(first));
    expect(reply.finish_reason).toBe('length');
  });

  it('a refusal ends with what the model said and why, and runs none of its tool calls', async () => {
    scriptAnthropic(server, [
      {
        content: [
          { type: 'text', text: 'I cannot help with that.' },
          { type: 'tool_use', id: 'toolu_r', name: 'write_file', input: { path: 'x' } },
        ],
        stop_reason: 'refusal',
      },
    ]);
    const reply = await model({ stream }).m.complete(request(first));
    expect(reply).toMatchObject({ finish_reason: 'content_filter', tool_calls: [] });
    expect(reply.content).toBe(
      'I cannot help with that.\n\nThe model declined to answer (stop_reason: refusal).',
    );
  });

  it('waits what a 429 asks (retry-after, retry-after-ms), telling each retry, then goes on', async () => {
    const edge = scriptAnthropic(server, [
      () =>
        apiError(429, 'rate_limit_error', 'Number of requests has exceeded your rate limit', {
          'retry-after': '3',
        }),
      () => apiError(429, 'rate_limit_error', 'slow down', { 'retry-after-ms': '250' }),
      text('done'),
    ]);
    const { m, sleeps } = model({ stream });
    const retries: unknown[] = [];
    const reply = await m.complete(request(first), { onRetry: (r) => retries.push(r) });
    expect(reply).toMatchObject({ content: 'done', attempts: 3 });
    expect(sleeps).toEqual([3000, 250]);
    expect(retries[0]).toMatchObject({
      attempt: 1,
      status: 429,
      delay_ms: 3000,
      reason: `model endpoint ${ANTHROPIC_BASE_URL} answered 429: rate_limit_error: Number of requests has exceeded your rate limit`,
    });
    expect(edge.requests).toHaveLength(3);
    expect(m.health?.()).toMatchObject({ state: 'ok' });
  });

  it('retries 529 overloaded with backoff and fails after its attempts, saying why', async () => {
    scriptAnthropic(
      server,
      [1, 2, 3].map(() => () => apiError(529, 'overloaded_error', 'Overloaded')),
    );
    const { m, sleeps } = model({ stream, maxAttempts: 3 });
    const err = (await m.complete(request(first)).catch((e: Error) => e)) as Error;
    expect(err.message).toBe(
      `Model call failed after 3 attempts: model endpoint ${ANTHROPIC_BASE_URL} answered 529: overloaded_error: Overloaded`,
    );
    expect(sleeps).toHaveLength(2);
    expect(m.health?.()).toMatchObject({ state: 'error', status: 529 });
  });

  it('a refused key (401) fails at once, naming ANTHROPIC_API_KEY', async () => {
    const edge = scriptAnthropic(server, [() => apiError(401, 'authentication_error', 'invalid x-api-key')]);
    const err = (await model({ stream })
      .m.complete(request(first))
      .catch((e: Error) => e)) as Error;
    expect(err.message).toBe(
      `Model call failed: model endpoint ${ANTHROPIC_BASE_URL} answered 401: authentication_error: invalid x-api-key ` +
        '(the endpoint refused the API key in ANTHROPIC_API_KEY: check it, and that it may use this model)',
    );
    expect(edge.requests).toHaveLength(1);
  });

  it('no credit left is not waited for (quota), a 400 about the request neither', async () => {
    scriptAnthropic(server, [
      () =>
        apiError(400, 'invalid_request_error', 'Your credit balance is too low to access the Anthropic API.'),
    ]);
    const { m, sleeps } = model({ stream });
    const err = (await m.complete(request(first)).catch((e: Error) => e)) as Error;
    expect(err.message).toMatch(
      /^Model call failed: .* answered 400: invalid_request_error: Your credit balance/,
    );
    expect(sleeps).toEqual([]);
    expect(m.health?.()).toMatchObject({ state: 'error', status: 400 });
  });

  it('a reply past its size bound fails without a retry', async () => {
    const edge = scriptAnthropic(server, [text('x'.repeat(500)), text('never')]);
    const err = (await model({ stream, maxReplyChars: 100 })
      .m.complete(request(first))
      .catch((e: Error) => e)) as Error;
    expect(err.message).toContain('ran past 100 characters');
    expect(edge.requests).toHaveLength(1);
  });
});

describe('the Anthropic client, streaming', () => {
  const events = (r: ScriptedReply) => streamEvents(r);

  it('retries a stream that sends an error event mid-reply, or ends before message_stop', async () => {
    const broken = events(text('partial answer')).slice(0, 4);
    scriptAnthropic(server, [
      () => sse([...broken, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }]),
      () => sse(broken),
      text('whole answer'),
    ]);
    const retries: { reason: string }[] = [];
    const { m } = model({ stream: true });
    const deltas: string[] = [];
    const reply = await m.complete(request(first), {
      onRetry: (r) => retries.push(r),
      onDelta: (t) => deltas.push(t),
    });
    expect(reply).toMatchObject({ content: 'whole answer', attempts: 3 });
    expect(retries.map((r) => r.reason)).toEqual([
      `the model endpoint ${ANTHROPIC_BASE_URL} sent an error mid-stream: overloaded_error: Overloaded`,
      `the model endpoint ${ANTHROPIC_BASE_URL} ended its stream before the reply was complete (no stop_reason)`,
    ]);
  });

  it('counts usage from message_start and message_delta', async () => {
    scriptAnthropic(server, [
      () =>
        sse(
          streamEvents(text('ok', { input_tokens: 5, output_tokens: 7, cache_read_input_tokens: 2000 })).map(
            (e) =>
              (e as { type: string }).type === 'message_delta'
                ? { ...(e as object), usage: { output_tokens: 33 } }
                : e,
          ),
        ),
    ]);
    const reply = await model({ stream: true }).m.complete(request(first));
    expect(reply.usage).toEqual({ prompt_tokens: 2005, completion_tokens: 33, total_tokens: 2038 });
    expect(reply.cached_tokens).toBe(2000);
  });

  it('an endpoint that answers a stream request with one Message is read as one', async () => {
    scriptAnthropic(server, [() => Response.json(messageBody(text('plain')))]);
    expect((await model({ stream: true }).m.complete(request(first))).content).toBe('plain');
  });
});

describe('the Anthropic client, unreachable', () => {
  it('names the endpoint, the network error and ANTHROPIC_BASE_URL when nothing listens there', async () => {
    const { createServer } = await import('node:net');
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const { leanFetch } = await import('../../../lib/http/lean-fetch.ts');
    const m = anthropicModel({
      baseURL: `http://127.0.0.1:${port}`,
      apiKey: 'k',
      timeoutMs: 5000,
      maxAttempts: 2,
      fetch: leanFetch,
      sleep: async () => {},
    });
    const err = (await m.complete(request(first)).catch((e: Error) => e)) as Error;
    expect(err.message).toMatch(
      new RegExp(
        `^Model call failed after 2 attempts: cannot reach the model endpoint http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED`,
      ),
    );
    expect(err.message).toContain('is ANTHROPIC_BASE_URL right?');
    expect(m.health?.()).toMatchObject({ state: 'unreachable' });
  });
});

describe('the provider setting', () => {
  it('is chosen from the endpoint settings, or said outright', () => {
    expect(loadConfig({}).agent.model).toMatchObject({ provider: 'openai-chat', name: 'gpt-4o-mini' });
    expect(loadConfig({ ANTHROPIC_API_KEY: 'k' }).agent.model).toMatchObject({
      provider: 'anthropic',
      apiKey: 'k',
      name: 'claude-sonnet-4-5',
    });
    // Both set: the OpenAI endpoint, as before there was a choice, unless AGENT_PROVIDER says.
    expect(loadConfig({ ANTHROPIC_API_KEY: 'k', OPENAI_API_KEY: 'o' }).agent.model.provider).toBe(
      'openai-chat',
    );
    expect(
      loadConfig({ ANTHROPIC_API_KEY: 'k', OPENAI_API_KEY: 'o', AGENT_PROVIDER: 'anthropic' }).agent.model,
    ).toMatchObject({ provider: 'anthropic', apiKey: 'k' });
    expect(() => loadConfig({ AGENT_PROVIDER: 'claude' })).toThrow(
      'AGENT_PROVIDER: must be openai-chat, openai-responses or anthropic',
    );
    // npm start's ready line names the model and its provider once an endpoint is set.
    const at = { agent: 'http://a', gateway: 'http://g' };
    expect(readyLine(at, loadConfig({ ANTHROPIC_API_KEY: 'k' }))).toContain(
      '; model claude-sonnet-4-5 (anthropic); ',
    );
    expect(readyLine(at, loadConfig({}))).not.toContain('model');
    expect(loadConfig({ AGENT_PROVIDER: 'openai-responses', OPENAI_API_KEY: 'o' }).agent.model).toMatchObject(
      {
        provider: 'openai-responses',
        apiKey: 'o',
      },
    );
  });
});
