import { request } from 'undici';

// A fetch for calls to JSON APIs (the model endpoint) over undici's request API. Node 20's fetch spends most
// of a small call's CPU on WHATWG streams and objects around the exchange (about three times what the
// request API spends); at hundreds of model calls a second that is a core. The answer is read whole and
// handed back as an ordinary Response, so a client built on fetch (the OpenAI SDK) sees no difference; an
// event stream is handed back as it comes.

/** The fetch Node started with; a replaced global (an interceptor, a test's mock) is honoured instead. */
const nativeFetch = globalThis.fetch;

function headerRecord(headers: RequestInit['headers']): Record<string, string> {
  if (!headers) return {};
  if (headers instanceof Headers) return Object.fromEntries(headers.entries());
  if (Array.isArray(headers)) return Object.fromEntries(headers);
  return headers as Record<string, string>;
}

/**
 * The most a whole answer may be (a model's reply without streaming; a streamed one has its own bound,
 * agent-server/clients/model-stream.ts): read up to it, and a longer one fails naming the bound.
 */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** A body's text, read up to MAX_ANSWER_BYTES. */
async function boundedText(body: NodeJS.ReadableStream & { destroy(): void }, url: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).byteLength;
    if (size > MAX_ANSWER_BYTES) {
      body.destroy();
      throw new Error(`${new URL(url).origin} answered more than ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** fetch(), through undici's request API unless the global fetch was replaced by someone. */
export const leanFetch: typeof fetch = async (input, init) => {
  const body = init?.body;
  if (
    globalThis.fetch !== nativeFetch ||
    (body != null && typeof body !== 'string') ||
    !(typeof input === 'string' || input instanceof URL)
  ) {
    return globalThis.fetch(input, init);
  }
  const res = await request(input, {
    method: (init?.method ?? 'GET') as 'GET',
    headers: headerRecord(init?.headers),
    body: body ?? undefined,
    signal: init?.signal ?? undefined,
  });
  const headers = new Headers();
  for (const [key, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(key, v);
  }
  // A stream (a streamed model reply) is handed on as it comes, not read whole first; its reader keeps up
  // (and bounds what it takes), so the chunks are passed on without Readable.toWeb's pull and queue.
  if (/^text\/event-stream/i.test(headers.get('content-type') ?? '')) {
    const body = res.body;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        body.on('data', (chunk: Buffer) => {
          // A stream its reader gave up (cancelled, errored) takes nothing more: the body goes.
          try {
            controller.enqueue(chunk);
          } catch {
            body.destroy();
          }
        });
        body.once('end', () => controller.close());
        body.once('error', (err) => controller.error(err));
      },
      cancel: () => {
        body.destroy();
      },
    });
    return new Response(stream, { status: res.statusCode, headers });
  }
  const text = await boundedText(res.body, String(input));
  // A status without a body (204, 304) cannot carry one in a Response.
  const empty = res.statusCode === 204 || res.statusCode === 304;
  return new Response(empty ? null : text, { status: res.statusCode, headers });
};
