import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type {
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { Usage } from './contract.ts';
import { ModelError, TaskStoppedError } from './errors.ts';

/** One chat request as the loop builds it. */
export interface ModelRequest {
  model: string;
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionTool[];
}

/** The assistant's reply: text and/or function tool calls, with token usage. */
export interface ModelReply {
  content: string | null;
  tool_calls: ChatCompletionMessageFunctionToolCall[];
  usage: Usage;
  /** Why the model stopped; `length` means the reply was cut off at the output limit. */
  finish_reason?: string | null;
  /** Attempts the call took (1 when it was not retried). */
  attempts?: number;
}

/** A retry about to happen: the attempt that failed, why, and how long the client waits before the next. */
export interface RetryInfo {
  attempt: number;
  status: number | null;
  reason: string;
  delay_ms: number;
}

/** Per-call options: `signal` aborts the call (and any wait between attempts); `onRetry` hears each retry. */
export interface CompleteOptions {
  signal?: AbortSignal;
  onRetry?: (retry: RetryInfo) => void;
}

/** What the loop talks to; the OpenAI client below in production, a scripted model in unit tests. */
export interface Model {
  complete(request: ModelRequest, options?: CompleteOptions): Promise<ModelReply>;
}

/** Settings of the OpenAI-compatible client and of toolshift's own retry policy. */
export interface OpenAIModelOptions {
  baseURL?: string;
  apiKey?: string;
  /** Deadline of one model call. */
  timeoutMs: number;
  /** Attempts in all, the first included. */
  maxAttempts: number;
  /** First backoff delay; doubles each retry (with jitter). */
  baseDelayMs?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
}

const RETRYABLE = new Set([408, 409, 429]);
const MAX_DELAY_MS = 60_000;

/** The delay a 429/503 asks for, from `retry-after-ms` or `retry-after` (seconds or an HTTP date). */
export function retryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (headers?.get('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return Math.min(ms, MAX_DELAY_MS);
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, MAX_DELAY_MS);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.min(Math.max(0, date - Date.now()), MAX_DELAY_MS);
}

/** The network error under an SDK connection error, as `CODE: message` (ECONNREFUSED, ENOTFOUND …). */
function networkCause(err: unknown): string | undefined {
  let cause = (err as { cause?: unknown }).cause;
  for (let depth = 0; cause && depth < 4; depth++) {
    const { code, message } = cause as { code?: unknown; message?: unknown };
    if (typeof code === 'string')
      return typeof message === 'string' && message ? `${code}: ${message}` : code;
    cause = (cause as { cause?: unknown }).cause;
  }
  const message = (err as { cause?: { message?: unknown } }).cause?.message;
  return typeof message === 'string' && message ? message : undefined;
}

function describe(
  err: unknown,
  timeoutMs: number,
  endpoint: string,
): { retry: boolean; message: string; delay?: number; status?: number } {
  if (err instanceof APIError && err.status !== undefined) {
    // An exhausted quota is a 429 that waiting does not fix: fail at once with the provider's message.
    const quota = err.code === 'insufficient_quota' || (err.type ?? '') === 'insufficient_quota';
    const retry = !quota && (RETRYABLE.has(err.status) || err.status >= 500);
    // The SDK's message starts with the status already ("401 Incorrect API key …").
    const text = err.message.replace(new RegExp(`^${err.status}\\s*`), '') || 'no message';
    return {
      retry,
      message: `model endpoint ${endpoint} answered ${err.status}: ${text}`,
      delay: retryAfterMs(err.headers),
      status: err.status,
    };
  }
  if (err instanceof APIConnectionError) {
    const timedOut = err instanceof APIConnectionTimeoutError;
    const cause = networkCause(err);
    return {
      retry: true,
      message: timedOut
        ? `model call to ${endpoint} timed out after ${timeoutMs} ms`
        : `cannot reach the model endpoint ${endpoint} (${cause ?? err.message}): is the server running, and is OPENAI_BASE_URL right?`,
    };
  }
  return { retry: false, message: (err as Error).message };
}

/** Waits for `wait` unless `signal` aborts first, then throws what `stopped` makes. */
function abortable(
  wait: Promise<void>,
  signal: AbortSignal | undefined,
  stopped: () => Error,
): Promise<void> {
  if (!signal) return wait;
  if (signal.aborted) return Promise.reject(stopped());
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(stopped());
    signal.addEventListener('abort', onAbort, { once: true });
    wait.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** A Model over any OpenAI-compatible endpoint, retrying 408/409/429/5xx and network errors with backoff. */
export function openAIModel(opts: OpenAIModelOptions): Model {
  // The SDK's own retries are off: it cannot be told our attempt budget and deadline, and tests need it.
  const client = new OpenAI({
    apiKey: opts.apiKey ?? 'unused',
    baseURL: opts.baseURL,
    maxRetries: 0,
    timeout: opts.timeoutMs,
    fetch: opts.fetch,
  });
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const baseDelay = opts.baseDelayMs ?? 500;
  return {
    async complete(request, options = {}) {
      const { signal } = options;
      const stopped = () =>
        signal?.reason instanceof TaskStoppedError ? signal.reason : new TaskStoppedError('cancelled');
      for (let attempt = 1; ; attempt++) {
        if (signal?.aborted) throw stopped();
        try {
          const res = await client.chat.completions.create(
            { model: request.model, messages: request.messages, tools: request.tools },
            { signal },
          );
          const message = res.choices[0]?.message;
          if (!message) throw new ModelError('the model endpoint returned no choices');
          return {
            content: message.content ?? null,
            tool_calls: (message.tool_calls ?? []).filter(
              (c): c is ChatCompletionMessageFunctionToolCall => c.type === 'function',
            ),
            finish_reason: res.choices[0]?.finish_reason ?? null,
            usage: {
              prompt_tokens: res.usage?.prompt_tokens ?? 0,
              completion_tokens: res.usage?.completion_tokens ?? 0,
              total_tokens: res.usage?.total_tokens ?? 0,
            },
            attempts: attempt,
          };
        } catch (err) {
          if (err instanceof ModelError) throw err;
          if (signal?.aborted || err instanceof APIUserAbortError) throw stopped();
          const failure = describe(err, opts.timeoutMs, client.baseURL);
          if (!failure.retry) throw new ModelError(`Model call failed: ${failure.message}`);
          if (attempt >= opts.maxAttempts) {
            throw new ModelError(`Model call failed after ${attempt} attempts: ${failure.message}`);
          }
          const backoff = Math.min(baseDelay * 2 ** (attempt - 1) * (0.75 + Math.random() / 2), MAX_DELAY_MS);
          const delay = Math.round(failure.delay ?? backoff);
          options.onRetry?.({
            attempt,
            status: failure.status ?? null,
            reason: failure.message,
            delay_ms: delay,
          });
          await abortable(sleep(delay), signal, stopped);
        }
      }
    },
  };
}
