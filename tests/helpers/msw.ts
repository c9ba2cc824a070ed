import { setupServer } from 'msw/node';

/** An msw server that mocks the model endpoint and lets loopback traffic (our own services) through. */
export function modelEdge() {
  const server = setupServer();
  server.listen({
    onUnhandledRequest(request, print) {
      const host = new URL(request.url).hostname;
      if (host === '127.0.0.1' || host === 'localhost') return;
      print.error();
    },
  });
  return server;
}

export const MODEL_BASE_URL = 'http://model.test/v1';

/** A chat completion body as an OpenAI-compatible server returns it. */
export function completion(
  message: Record<string, unknown>,
  usage = { prompt_tokens: 100, completion_tokens: 10 },
) {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 0,
    model: 'test-model',
    choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: 'stop' }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}

/** One chunk of a streamed chat completion: a piece of the reply (`delta`), why it stopped, or the usage. */
export function chunk(
  delta: Record<string, unknown> | null,
  extra: { finish_reason?: string; usage?: { prompt_tokens: number; completion_tokens: number } } = {},
) {
  const usage = extra.usage && {
    ...extra.usage,
    total_tokens: extra.usage.prompt_tokens + extra.usage.completion_tokens,
  };
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion.chunk',
    created: 0,
    model: 'test-model',
    choices: delta ? [{ index: 0, delta, finish_reason: extra.finish_reason ?? null }] : [],
    ...(usage ? { usage } : {}),
  };
}

/** A text answer as an OpenAI-compatible server streams it: its words, a stop, the usage, `[DONE]`. */
export function textChunks(text: string, usage = { prompt_tokens: 100, completion_tokens: 10 }): unknown[] {
  const words = text.split(/(?<= )/);
  return [
    chunk({ role: 'assistant', content: '' }),
    ...words.map((w) => chunk({ content: w })),
    chunk({}, { finish_reason: 'stop' }),
    chunk(null, { usage }),
    '[DONE]',
  ];
}

/**
 * A streamed answer: each item one `data:` event (an object as JSON, a string as is). `hold`: the stream stays
 * open after them (a stall), until the request is aborted. `after`: once `opened` resolves, `rest` follows and
 * the stream ends.
 */
export function streamed(
  items: unknown[],
  opts: { hold?: boolean; after?: { opened: Promise<void>; rest: unknown[] } } = {},
): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (item: unknown) => {
        const data = typeof item === 'string' ? item : JSON.stringify(item);
        controller.enqueue(encoder.encode(`data: ${data}\n\n`));
      };
      for (const item of items) send(item);
      if (opts.hold) return;
      if (opts.after) {
        await opts.after.opened;
        for (const item of opts.after.rest) send(item);
      }
      controller.close();
    },
  });
  return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
}
