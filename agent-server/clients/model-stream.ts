import { createParser } from 'eventsource-parser';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import { ModelError } from '../errors.ts';

// A model reply asked for as a stream (`stream: true`): its chunks read as they come, the text handed on as it
// arrives, and put together into the one completion a reply without streaming would have been. An attempt has
// a deadline (the model timeout) and a stall limit (no chunk for that long); a stream that ends without saying
// why the model stopped was cut off. Each of these is a Failure the retry policy (model.ts) judges.

/** How a failed attempt went: whether to retry, what to say, and what it tells of the endpoint's state. */
export interface Failure {
  retry: boolean;
  message: string;
  delay?: number;
  status?: number;
  /** `unreachable`: no answer came (refused, timed out, TLS); `error`: an HTTP error not about this request. */
  state: 'unreachable' | 'error' | 'ok';
}

/** What bounds one streamed attempt. */
export interface StreamLimits {
  /** The endpoint, as errors name it. */
  endpoint: string;
  /** The whole attempt's deadline (AGENT_MODEL_TIMEOUT_MS). */
  timeoutMs: number;
  /** The longest wait for the next chunk (AGENT_MODEL_STALL_MS). */
  stallMs: number;
  /** The most characters of text and tool-call arguments one reply may carry. */
  maxChars: number;
}

/** A streamed attempt that failed in a way the retry policy judges: a stall, a cut-off, the deadline. */
export class StreamFailure extends Error {
  readonly failure: Failure;
  constructor(failure: Failure) {
    super(failure.message);
    this.failure = failure;
  }
}

/** Tool calls a reply may carry; a stream naming more is refused (each index would hold a call). */
export const MAX_TOOL_CALLS = 256;
/** Bytes of one stream at most: each token's chunk is wrapped in some 150 bytes of JSON. */
export const MAX_STREAM_BYTES = 64 * 1024 * 1024;

/** Reads one provider's event stream into its reply (`alive` on each read, text to `onDelta`). */
export type StreamReader<T> = (
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
  alive: () => void,
  limits: StreamLimits,
  onDelta?: (text: string) => void,
) => Promise<T>;

/**
 * One streamed attempt: `open` sends the request (under the attempt's signal) and answers with the response;
 * its chunks go together into a ChatCompletion, the text to `onDelta` as it comes. A provider that answers
 * with one JSON completion instead (it ignores `stream`) is read as one.
 */
export async function streamAttempt<T = ChatCompletion>(
  open: (signal: AbortSignal) => Promise<Response>,
  limits: StreamLimits,
  signal: AbortSignal | undefined,
  onDelta?: (text: string) => void,
  read: StreamReader<T> = readStream as StreamReader<unknown> as StreamReader<T>,
): Promise<T> {
  const attempt = new AbortController();
  const fail = (failure: Omit<Failure, 'retry'>) =>
    attempt.abort(new StreamFailure({ retry: true, ...failure }));
  const onAbort = () => attempt.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  const deadline = setTimeout(
    () =>
      fail({
        state: 'unreachable',
        message: `model call to ${limits.endpoint} timed out after ${limits.timeoutMs} ms (AGENT_MODEL_TIMEOUT_MS)`,
      }),
    limits.timeoutMs,
  );
  // The stall watch: the time of the last chunk, checked when the limit could have passed (not a timer a chunk).
  let lastChunk = performance.now();
  const alive = () => {
    lastChunk = performance.now();
  };
  let stall: NodeJS.Timeout | undefined;
  const watch = (ms: number) => {
    stall = setTimeout(() => {
      const quiet = performance.now() - lastChunk;
      if (quiet < limits.stallMs) {
        watch(limits.stallMs - quiet);
        return;
      }
      fail({
        state: 'error',
        message: `the model endpoint ${limits.endpoint} sent nothing for ${limits.stallMs} ms mid-reply (AGENT_MODEL_STALL_MS)`,
      });
    }, ms);
  };
  try {
    const res = await open(attempt.signal);
    if (!res.body) throw new ModelError(`the model endpoint ${limits.endpoint} answered with an empty body`);
    if (!/^text\/event-stream/i.test(res.headers.get('content-type') ?? '')) {
      return (await res.json()) as T;
    }
    alive();
    watch(limits.stallMs);
    return await read(res.body, attempt.signal, alive, limits, onDelta);
  } catch (err) {
    // The attempt's own stop (a stall, the deadline) says why; the task's stop is the caller's to tell.
    if (attempt.signal.reason instanceof StreamFailure) throw attempt.signal.reason;
    throw err;
  } finally {
    clearTimeout(deadline);
    clearTimeout(stall);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** A reply as its chunks have built it so far: tool calls by their index, arguments joined. */
interface Assembly {
  id?: string;
  model?: string;
  content: string | null;
  calls: Map<number, { id: string; name: string; arguments: string }>;
  chars: number;
  finish?: ChatCompletion.Choice['finish_reason'];
  usage?: ChatCompletion['usage'];
}

/** Reads the stream's chunks up to `[DONE]` (or its end) into a completion. */
async function readStream(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
  alive: () => void,
  limits: StreamLimits,
  onDelta?: (text: string) => void,
): Promise<ChatCompletion> {
  const a: Assembly = { content: null, calls: new Map(), chars: 0 };
  let done = false;
  const parser = createParser({
    onEvent: (m) => {
      if (done) return;
      if (m.data === '[DONE]') done = true;
      else take(a, parseChunk(m.data, limits), limits, onDelta);
    },
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  // A stall or the deadline ends the read even where the body is not tied to the request's signal.
  const hangUp = () => {
    reader.cancel().catch(() => undefined);
  };
  signal.addEventListener('abort', hangUp, { once: true });
  let bytes = 0;
  try {
    while (!done) {
      const { done: ended, value } = await reader.read();
      if (ended) break;
      alive();
      bytes += value.byteLength;
      if (bytes > MAX_STREAM_BYTES) throw tooLong(limits, `${MAX_STREAM_BYTES} bytes of stream`);
      parser.feed(decoder.decode(value, { stream: true }));
    }
    if (signal.aborted) throw signal.reason;
  } catch (err) {
    if (signal.aborted || err instanceof StreamFailure || err instanceof ModelError) throw err;
    throw new StreamFailure({
      retry: true,
      state: 'unreachable',
      message: `the stream from the model endpoint ${limits.endpoint} broke off (${(err as Error).message})`,
    });
  } finally {
    signal.removeEventListener('abort', hangUp);
    // After `[DONE]` the body's end is read, so its connection is kept; a failed read's body goes at once.
    if (done) drain(reader);
    else hangUp();
  }
  if (!a.finish) {
    throw new StreamFailure({
      retry: true,
      state: 'error',
      message: `the model endpoint ${limits.endpoint} ended its stream before the reply was complete (no finish_reason)`,
    });
  }
  return completionOf(a);
}

/** Reads what follows `[DONE]` (the body's end) in the background; a body that goes on past a few reads goes. */
export function drain(reader: ReadableStreamDefaultReader<Uint8Array>, reads = 4): void {
  reader.read().then(
    ({ done }) => {
      if (done) return;
      if (reads > 1) drain(reader, reads - 1);
      else reader.cancel().catch(() => undefined);
    },
    () => undefined,
  );
}

/** One chunk's JSON; an error the provider sends mid-stream is a failure to retry, with its message. */
function parseChunk(data: string, limits: StreamLimits): ChatCompletionChunk {
  let chunk: ChatCompletionChunk & { error?: { message?: unknown } | string };
  try {
    chunk = JSON.parse(data);
  } catch {
    throw new StreamFailure({
      retry: true,
      state: 'error',
      message: `the model endpoint ${limits.endpoint} sent a stream chunk that is not JSON: ${data.slice(0, 200)}`,
    });
  }
  if (chunk.error !== undefined) {
    const said = typeof chunk.error === 'string' ? chunk.error : String(chunk.error.message ?? 'no message');
    throw new StreamFailure({
      retry: true,
      state: 'error',
      message: `the model endpoint ${limits.endpoint} sent an error mid-stream: ${said.slice(0, 300)}`,
    });
  }
  return chunk;
}

/** The reply passed its cap: a failure, not retried (the same request would run past it again). */
export function tooLong(limits: StreamLimits, what: string): ModelError {
  return new ModelError(
    `Model call failed: the reply from ${limits.endpoint} ran past ${what} (a reply holds at most ` +
      `${limits.maxChars} characters of text and tool-call arguments, and ${MAX_TOOL_CALLS} tool calls)`,
  );
}

/** Adds one chunk to the reply: its text (told to `onDelta`), its tool-call pieces, why it stopped, its usage. */
function take(
  a: Assembly,
  chunk: ChatCompletionChunk,
  limits: StreamLimits,
  onDelta?: (text: string) => void,
) {
  a.id ??= typeof chunk.id === 'string' ? chunk.id : undefined;
  a.model ??= typeof chunk.model === 'string' ? chunk.model : undefined;
  if (chunk.usage) a.usage = chunk.usage;
  const choice = chunk.choices?.[0];
  if (!choice) return;
  const grow = (n: number) => {
    a.chars += n;
    if (a.chars > limits.maxChars) throw tooLong(limits, `${limits.maxChars} characters`);
  };
  const text = choice.delta?.content;
  if (typeof text === 'string') {
    grow(text.length);
    a.content = (a.content ?? '') + text;
    if (text) onDelta?.(text);
  }
  for (const [i, piece] of (choice.delta?.tool_calls ?? []).entries()) {
    const index = typeof piece.index === 'number' ? piece.index : i;
    let call = a.calls.get(index);
    if (!call) {
      if (a.calls.size >= MAX_TOOL_CALLS) throw tooLong(limits, `${MAX_TOOL_CALLS} tool calls`);
      call = { id: '', name: '', arguments: '' };
      a.calls.set(index, call);
    }
    if (piece.id) call.id = piece.id;
    if (piece.function?.name && !call.name) call.name = piece.function.name;
    const args = piece.function?.arguments;
    if (args) {
      grow(args.length);
      call.arguments += args;
    }
  }
  if (choice.finish_reason) a.finish = choice.finish_reason;
}

/** The completion the chunks made, as a reply without streaming would have come. */
function completionOf(a: Assembly): ChatCompletion {
  const calls = [...a.calls.entries()].sort(([x], [y]) => x - y);
  // What the stream did not say of itself stays absent, as in a completion without it.
  return {
    id: a.id as string,
    object: 'chat.completion',
    created: 0,
    model: a.model as string,
    choices: [
      {
        index: 0,
        finish_reason: a.finish ?? 'stop',
        logprobs: null,
        message: {
          role: 'assistant',
          content: a.content,
          refusal: null,
          ...(calls.length > 0
            ? {
                tool_calls: calls.map(([index, c]) => ({
                  id: c.id || `call_${index}`,
                  type: 'function' as const,
                  function: { name: c.name, arguments: c.arguments },
                })),
              }
            : {}),
        },
      },
    ],
    ...(a.usage ? { usage: a.usage } : {}),
  };
}
