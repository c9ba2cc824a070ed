import { delay, HttpResponse, http } from 'msw';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openAIModel, retryAfterMs } from '../../../agent-server/clients/model.ts';
import { TaskStoppedError } from '../../../agent-server/errors.ts';
import { completion, MODEL_BASE_URL, modelEdge } from '../../helpers/msw.ts';

const server = modelEdge();
afterEach(() => server.resetHandlers());
afterAll(() => server.close());

const URL = `${MODEL_BASE_URL}/chat/completions`;
const request = { model: 'test-model', messages: [{ role: 'user' as const, content: 'hi' }], tools: [] };

function model(overrides: { timeoutMs?: number; maxAttempts?: number } = {}) {
  const sleeps: number[] = [];
  const m = openAIModel({
    baseURL: MODEL_BASE_URL,
    apiKey: 'test',
    timeoutMs: overrides.timeoutMs ?? 5000,
    maxAttempts: overrides.maxAttempts ?? 4,
    baseDelayMs: 100,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
  return { m, sleeps };
}

function failing(status: number, headers: Record<string, string> = {}, message = `status ${status}`) {
  return HttpResponse.json(
    { error: { message, type: 'test' } },
    { status, headers: { 'x-should-retry': 'false', ...headers } },
  );
}

describe('the OpenAI-compatible model client', () => {
  it('names the endpoint and the network error when nothing listens there', async () => {
    // A port that was just free: the real lean fetch (undici) under the SDK, as the agent-server runs it.
    const { createServer } = await import('node:net');
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const { leanFetch } = await import('../../../lib/http/lean-fetch.ts');
    const m = openAIModel({
      baseURL: `http://127.0.0.1:${port}/v1`,
      timeoutMs: 5000,
      maxAttempts: 2,
      fetch: leanFetch,
      sleep: async () => {},
    });
    const err = (await m.complete(request).catch((e: Error) => e)) as Error;
    expect(err.message).toMatch(
      new RegExp(
        `^Model call failed after 2 attempts: cannot reach the model endpoint http://127\\.0\\.0\\.1:${port}/v1 \\(ECONNREFUSED`,
      ),
    );
    expect(err.message).toContain('OPENAI_BASE_URL');
  });

  it('parses text, tool calls and usage', async () => {
    server.use(
      http.post(URL, () =>
        HttpResponse.json(
          completion({
            content: 'thinking',
            tool_calls: [
              { id: 't1', type: 'function', function: { name: 'write_file', arguments: '{"path":"a"}' } },
            ],
          }),
        ),
      ),
    );
    const reply = await model().m.complete(request);
    expect(reply.content).toBe('thinking');
    expect(reply.tool_calls[0]).toMatchObject({ id: 't1', function: { name: 'write_file' } });
    expect(reply.usage).toEqual({ prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 });
  });

  it('says a refusal as the answer', async () => {
    server.use(
      http.post(URL, () => HttpResponse.json(completion({ content: null, refusal: 'I cannot help.' }))),
    );
    const reply = await model().m.complete(request);
    expect(reply).toMatchObject({ content: 'The model refused: I cannot help.', tool_calls: [] });
  });

  it('sends the request’s cache key as prompt_cache_key to OpenAI, and to no other server', async () => {
    const keys: unknown[] = [];
    const openai = 'https://api.openai.com/v1';
    server.use(
      http.post(URL, async ({ request: req }) => {
        keys.push(((await req.json()) as { prompt_cache_key?: unknown }).prompt_cache_key);
        return HttpResponse.json(completion({ content: 'ok' }));
      }),
      http.post(`${openai}/chat/completions`, async ({ request: req }) => {
        keys.push(((await req.json()) as { prompt_cache_key?: unknown }).prompt_cache_key);
        return HttpResponse.json(completion({ content: 'ok' }));
      }),
    );
    const atOpenAI = openAIModel({ baseURL: openai, apiKey: 'test', timeoutMs: 5000, maxAttempts: 1 });
    await atOpenAI.complete({ ...request, cacheKey: 'thr_1' });
    await atOpenAI.complete(request);
    // Another chat-completions server (vLLM, Ollama, a proxy) may refuse a field it does not know.
    await model().m.complete({ ...request, cacheKey: 'thr_1' });
    expect(keys).toEqual(['thr_1', undefined, undefined]);
  });

  it('retries a 429, waiting what retry-after asks', async () => {
    let n = 0;
    server.use(
      http.post(URL, () =>
        ++n === 1 ? failing(429, { 'retry-after': '2' }) : HttpResponse.json(completion({ content: 'ok' })),
      ),
    );
    const { m, sleeps } = model();
    expect((await m.complete(request)).content).toBe('ok');
    expect(n).toBe(2);
    expect(sleeps).toEqual([2000]);
  });

  it('fails at once on a 429 whose code is insufficient_quota, with the provider’s message', async () => {
    let n = 0;
    const message = 'You exceeded your current quota, please check your plan and billing details.';
    server.use(
      http.post(URL, () => {
        n++;
        return HttpResponse.json(
          { error: { message, type: 'insufficient_quota', code: 'insufficient_quota', param: null } },
          { status: 429, headers: { 'x-should-retry': 'false', 'retry-after': '1' } },
        );
      }),
    );
    const { m, sleeps } = model();
    const err = await m.complete(request).catch((e) => e);
    expect(err.message).toBe(`Model call failed: model endpoint ${MODEL_BASE_URL} answered 429: ${message}`);
    expect(n).toBe(1);
    expect(sleeps).toEqual([]);
  });

  it('retries 408, 409 and 5xx with growing backoff, then succeeds', async () => {
    const statuses = [408, 409, 503];
    let n = 0;
    server.use(
      http.post(URL, () =>
        n < statuses.length ? failing(statuses[n++]) : HttpResponse.json(completion({ content: 'ok' })),
      ),
    );
    const { m, sleeps } = model();
    expect((await m.complete(request)).content).toBe('ok');
    expect(sleeps).toHaveLength(3);
    expect(sleeps[0]).toBeGreaterThanOrEqual(75);
    expect(sleeps[0]).toBeLessThanOrEqual(125);
    expect(sleeps[2]).toBeGreaterThanOrEqual(300);
    expect(sleeps[2]).toBeLessThanOrEqual(500);
  });

  it('gives up after the attempt budget with the last error', async () => {
    let n = 0;
    server.use(
      http.post(URL, () => {
        n++;
        return failing(500, {}, 'upstream exploded');
      }),
    );
    const { m } = model({ maxAttempts: 3 });
    await expect(m.complete(request)).rejects.toThrow(
      /failed after 3 attempts: model endpoint http:\/\/model\.test\/v1 answered 500: upstream exploded/,
    );
    expect(n).toBe(3);
  });

  it('does not retry other 4xx and reports the provider’s message', async () => {
    let n = 0;
    server.use(
      http.post(URL, () => {
        n++;
        return failing(401, {}, 'Incorrect API key provided');
      }),
    );
    const { m, sleeps } = model();
    const err = (await m.complete(request).catch((e: Error) => e)) as Error;
    // The endpoint is named, the status said once ("answered 401: 401 …" read badly), and the key named.
    expect(err.message).toBe(
      `Model call failed: model endpoint ${MODEL_BASE_URL} answered 401: Incorrect API key provided ` +
        '(the endpoint refused the API key in OPENAI_API_KEY: check it, and that it may use this model)',
    );
    expect(n).toBe(1);
    expect(sleeps).toEqual([]);
  });

  it('enforces a per-call deadline and retries a call that timed out', async () => {
    let n = 0;
    server.use(
      http.post(URL, async () => {
        n++;
        await delay('infinite');
        return HttpResponse.json(completion({ content: 'never' }));
      }),
    );
    const { m } = model({ timeoutMs: 150, maxAttempts: 2 });
    await expect(m.complete(request)).rejects.toThrow(
      /failed after 2 attempts: model call to http:\/\/model\.test\/v1 timed out after 150 ms/,
    );
    expect(n).toBe(2);
  });

  it('tells the caller about each retry (status, reason, delay) and how many attempts the call took', async () => {
    let n = 0;
    server.use(
      http.post(URL, () =>
        ++n < 3
          ? failing(503, { 'retry-after-ms': '40' }, 'overloaded')
          : HttpResponse.json(completion({ content: 'ok' })),
      ),
    );
    const retries: unknown[] = [];
    const reply = await model().m.complete(request, { onRetry: (r) => retries.push(r) });
    expect(reply.attempts).toBe(3);
    expect(retries).toEqual([
      {
        attempt: 1,
        status: 503,
        reason: 'model endpoint http://model.test/v1 answered 503: overloaded',
        delay_ms: 40,
      },
      {
        attempt: 2,
        status: 503,
        reason: 'model endpoint http://model.test/v1 answered 503: overloaded',
        delay_ms: 40,
      },
    ]);
  });

  it('aborts a call in flight when the task is stopped, without retrying it', async () => {
    let n = 0;
    let arrived: () => void = () => {};
    const inFlight = new Promise<void>((r) => {
      arrived = r;
    });
    server.use(
      http.post(URL, async () => {
        n++;
        arrived();
        await delay('infinite');
        return HttpResponse.json(completion({ content: 'never' }));
      }),
    );
    const controller = new AbortController();
    const call = model().m.complete(request, { signal: controller.signal });
    await inFlight;
    controller.abort(new TaskStoppedError('cancelled', 'The task was cancelled by a client'));
    const err = await call.catch((e) => e);
    expect(err).toBeInstanceOf(TaskStoppedError);
    expect(err.reason).toBe('cancelled');
    expect(n).toBe(1);
  });

  it('stops waiting between attempts when the task is stopped', async () => {
    server.use(http.post(URL, () => failing(503)));
    const controller = new AbortController();
    const m = openAIModel({
      baseURL: MODEL_BASE_URL,
      apiKey: 'test',
      timeoutMs: 5000,
      maxAttempts: 4,
      sleep: () => new Promise(() => {}),
    });
    const call = m.complete(request, {
      signal: controller.signal,
      onRetry: () => controller.abort(new TaskStoppedError('timed_out')),
    });
    const err = await call.catch((e) => e);
    expect(err).toBeInstanceOf(TaskStoppedError);
    expect(err.reason).toBe('timed_out');
  });

  it('reads retry-after in seconds, milliseconds and as an HTTP date', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '3' }))).toBe(3000);
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '250' }))).toBe(250);
    const inTwoSeconds = new Date(Date.now() + 2000).toUTCString();
    const ms = retryAfterMs(new Headers({ 'retry-after': inTwoSeconds })) ?? -1;
    expect(ms).toBeGreaterThan(500);
    expect(ms).toBeLessThanOrEqual(2000);
    expect(retryAfterMs(new Headers({ 'retry-after': '9999' }))).toBe(60_000);
    expect(retryAfterMs(new Headers())).toBeUndefined();
  });
});
