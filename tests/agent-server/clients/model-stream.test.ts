import { HttpResponse, http as mock } from 'msw';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type CompleteOptions, openAIModel, type RetryInfo } from '../../../agent-server/clients/model.ts';
import { ModelError } from '../../../agent-server/errors.ts';
import { chunk, completion, MODEL_BASE_URL, modelEdge, streamed, textChunks } from '../../helpers/msw.ts';

// The client with streaming on: the reply put together from its chunks, the text heard as it comes, and a
// stream that is cut off, stalls or runs too long retried or failed with the reason.

const server = modelEdge();
afterEach(() => server.resetHandlers());
afterAll(() => server.close());

const URL = `${MODEL_BASE_URL}/chat/completions`;
const request = { model: 'test-model', messages: [{ role: 'user' as const, content: 'hi' }], tools: [] };

function model(
  overrides: {
    timeoutMs?: number;
    maxAttempts?: number;
    stallMs?: number;
    maxReplyChars?: number;
    stream?: boolean;
  } = {},
) {
  return openAIModel({
    baseURL: MODEL_BASE_URL,
    apiKey: 'test',
    timeoutMs: 5000,
    maxAttempts: 3,
    baseDelayMs: 1,
    stream: true,
    sleep: async () => {},
    ...overrides,
  });
}

/** Calls the model, keeping what it heard: the text as it came, and the retries. */
async function ask(m: ReturnType<typeof model>, options: CompleteOptions = {}) {
  const deltas: string[] = [];
  const retries: RetryInfo[] = [];
  const reply = await m
    .complete(request, { ...options, onDelta: (t) => deltas.push(t), onRetry: (r) => retries.push(r) })
    .catch((err: Error) => err);
  return { reply, deltas, retries };
}

describe('the model client, streaming', () => {
  it('asks for a stream with usage, hears the text as it comes, and puts the reply together', async () => {
    let body: Record<string, unknown> = {};
    server.use(
      mock.post(URL, async ({ request: req }) => {
        body = (await req.json()) as Record<string, unknown>;
        return streamed(textChunks('The answer is 42.', { prompt_tokens: 7, completion_tokens: 5 }));
      }),
    );
    const { reply, deltas } = await ask(model());
    expect(body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(deltas).toEqual(['The ', 'answer ', 'is ', '42.']);
    expect(reply).toMatchObject({
      content: 'The answer is 42.',
      tool_calls: [],
      finish_reason: 'stop',
      usage: { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 },
      attempts: 1,
      model: 'test-model',
      id: 'chatcmpl-test',
    });
    expect(reply).not.toHaveProperty('usage_missing');
  });

  it('assembles tool calls by index, their arguments joined across chunks', async () => {
    const call = (index: number, piece: Record<string, unknown>) =>
      chunk({ tool_calls: [{ index, ...piece }] });
    server.use(
      mock.post(URL, () =>
        streamed([
          chunk({ role: 'assistant', content: null }),
          call(0, { id: 'c1', type: 'function', function: { name: 'read_file', arguments: '' } }),
          call(0, { function: { arguments: '{"path":' } }),
          call(1, { id: 'c2', type: 'function', function: { name: 'list_dir', arguments: '{"path"' } }),
          call(0, { function: { arguments: '"a.txt"}' } }),
          call(1, { function: { arguments: ':"."}' } }),
          chunk({}, { finish_reason: 'tool_calls' }),
          chunk(null, { usage: { prompt_tokens: 3, completion_tokens: 4 } }),
          '[DONE]',
        ]),
      ),
    );
    const { reply, deltas } = await ask(model());
    expect(deltas).toEqual([]);
    expect(reply).toMatchObject({
      content: null,
      finish_reason: 'tool_calls',
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.txt"}' } },
        { id: 'c2', type: 'function', function: { name: 'list_dir', arguments: '{"path":"."}' } },
      ],
    });
  });

  it('says when the endpoint sent no usage at all, rather than counting zero tokens', async () => {
    server.use(
      mock.post(URL, () =>
        streamed([chunk({ content: 'hi' }), chunk({}, { finish_reason: 'stop' }), '[DONE]']),
      ),
    );
    const { reply } = await ask(model());
    expect(reply).toMatchObject({
      content: 'hi',
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      usage_missing: true,
    });
  });

  it('retries a stream cut off before the reply was complete, telling onRetry why', async () => {
    let n = 0;
    server.use(
      mock.post(URL, () =>
        ++n === 1 ? streamed([chunk({ content: 'The ans' })]) : streamed(textChunks('The answer.')),
      ),
    );
    const { reply, deltas, retries } = await ask(model());
    expect(n).toBe(2);
    expect(reply).toMatchObject({ content: 'The answer.', attempts: 2 });
    expect(retries).toEqual([
      {
        attempt: 1,
        status: null,
        reason: `the model endpoint ${MODEL_BASE_URL} ended its stream before the reply was complete (no finish_reason)`,
        delay_ms: expect.any(Number),
      },
    ]);
    // The first attempt's text was heard before it was cut off; its retry is the listener's word to drop it.
    expect(deltas).toEqual(['The ans', 'The ', 'answer.']);
  });

  it('retries an error status before the stream as before (a 503), then reads the stream', async () => {
    let n = 0;
    server.use(
      mock.post(URL, () =>
        ++n === 1
          ? HttpResponse.json(
              { error: { message: 'overloaded' } },
              { status: 503, headers: { 'x-should-retry': 'false' } },
            )
          : streamed(textChunks('ok')),
      ),
    );
    const { reply, retries } = await ask(model());
    expect(reply).toMatchObject({ content: 'ok', attempts: 2 });
    expect(retries[0]).toMatchObject({
      status: 503,
      reason: `model endpoint ${MODEL_BASE_URL} answered 503: overloaded`,
    });
  });

  it('retries an error the endpoint sends mid-stream, with its message', async () => {
    let n = 0;
    server.use(
      mock.post(URL, () =>
        ++n === 1
          ? streamed([chunk({ content: 'x' }), { error: { message: 'backend overloaded' } }])
          : streamed(textChunks('ok')),
      ),
    );
    const { reply, retries } = await ask(model());
    expect(reply).toMatchObject({ content: 'ok', attempts: 2 });
    expect(retries[0].reason).toBe(
      `the model endpoint ${MODEL_BASE_URL} sent an error mid-stream: backend overloaded`,
    );
  });

  it('abandons a stream that stalls and retries it, well within the model timeout', async () => {
    let n = 0;
    server.use(
      mock.post(URL, () =>
        ++n === 1 ? streamed([chunk({ content: 'The' })], { hold: true }) : streamed(textChunks('Done.')),
      ),
    );
    const started = Date.now();
    const { reply, retries } = await ask(model({ stallMs: 50 }));
    expect(reply).toMatchObject({ content: 'Done.', attempts: 2 });
    expect(retries[0].reason).toBe(
      `the model endpoint ${MODEL_BASE_URL} sent nothing for 50 ms mid-reply (AGENT_MODEL_STALL_MS)`,
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('fails with the reason when every attempt stalls', async () => {
    server.use(mock.post(URL, () => streamed([chunk({ content: 'The' })], { hold: true })));
    const { reply } = await ask(model({ stallMs: 30, maxAttempts: 2 }));
    expect(reply).toBeInstanceOf(ModelError);
    expect((reply as Error).message).toBe(
      `Model call failed after 2 attempts: the model endpoint ${MODEL_BASE_URL} sent nothing for 30 ms mid-reply (AGENT_MODEL_STALL_MS)`,
    );
  });

  it('ends a stream that trickles past the model timeout: the deadline bounds the whole attempt', async () => {
    const encoder = new TextEncoder();
    server.use(
      mock.post(URL, () => {
        // A chunk every 10 ms, forever: never a stall, never an end.
        let timer: NodeJS.Timeout | undefined;
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            timer = setInterval(() => {
              try {
                controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk({ content: '.' }))}\n\n`));
              } catch {
                clearInterval(timer);
              }
            }, 10);
          },
          cancel: () => clearInterval(timer),
        });
        return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
      }),
    );
    const { reply, deltas } = await ask(model({ timeoutMs: 150, stallMs: 100, maxAttempts: 1 }));
    expect((reply as Error).message).toBe(
      `Model call failed after 1 attempt: model call to ${MODEL_BASE_URL} timed out after 150 ms (AGENT_MODEL_TIMEOUT_MS)`,
    );
    expect(deltas.length).toBeGreaterThan(1);
  });

  it('fails a reply past its cap at once, saying what the cap is', async () => {
    let n = 0;
    server.use(
      mock.post(URL, () => {
        n++;
        return streamed(textChunks('word '.repeat(20)));
      }),
    );
    const { reply } = await ask(model({ maxReplyChars: 30 }));
    expect(n).toBe(1);
    expect(reply).toBeInstanceOf(ModelError);
    expect((reply as Error).message).toMatch(
      new RegExp(
        `^Model call failed: the reply from ${MODEL_BASE_URL.replace(/\./g, '\\.')} ran past 30 characters \\(a reply holds at most 30 characters of text and tool-call arguments`,
      ),
    );
  });

  it('asks as before with streaming off: no stream in the request, the reply read whole', async () => {
    let body: Record<string, unknown> = {};
    server.use(
      mock.post(URL, async ({ request: req }) => {
        body = (await req.json()) as Record<string, unknown>;
        return HttpResponse.json(completion({ content: 'whole' }));
      }),
    );
    const { reply, deltas } = await ask(model({ stream: false }));
    // No tools offered, no `tools` sent (some providers refuse an empty array).
    expect(Object.keys(body).sort()).toEqual(['messages', 'model']);
    expect(reply).toMatchObject({ content: 'whole', attempts: 1 });
    expect(deltas).toEqual([]);
  });

  it('reads a whole JSON completion from an endpoint that ignores stream: true', async () => {
    server.use(mock.post(URL, () => HttpResponse.json(completion({ content: 'whole' }))));
    const { reply, deltas } = await ask(model());
    expect(reply).toMatchObject({ content: 'whole', usage: { total_tokens: 110 }, attempts: 1 });
    expect(deltas).toEqual([]);
  });
});
