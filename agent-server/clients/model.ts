import OpenAI, { APIUserAbortError } from 'openai';
import type {
  ChatCompletion,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { Usage } from '../contract.ts';
import { ModelError, TaskStoppedError } from '../errors.ts';
import { describe, MAX_DELAY_MS } from './model-errors.ts';
import { chatReader, type Failure, streamAttempt } from './model-stream.ts';

export { retryAfterMs } from './model-errors.ts';

/** One chat request as the loop builds it. */
export interface ModelRequest {
  model: string;
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionTool[];
  /**
   * Groups requests that share a prefix for the provider's prompt cache (`prompt_cache_key`): the loop sends
   * the task's thread id (its task id when it has no thread), so a thread's turns go to the same cache.
   */
  cacheKey?: string;
}

/** The assistant's reply: text and/or function tool calls, with token usage. */
export interface ModelReply {
  content: string | null;
  tool_calls: ChatCompletionMessageFunctionToolCall[];
  usage: Usage;
  /** The endpoint sent no usage (some do not when streaming): `usage` is zeros, not a count. */
  usage_missing?: true;
  /** Why the model stopped; `length` means the reply was cut off at the output limit. */
  finish_reason?: string | null;
  /** Attempts the call took (1 when it was not retried). */
  attempts?: number;
  /** What the response says of itself (for traces): the model that answered, its id, prompt tokens served from cache. */
  model?: string;
  id?: string;
  cached_tokens?: number;
  /** Prompt tokens written to the provider's cache by this request (Anthropic reports them; priced above input). */
  cache_write_tokens?: number;
}

/** A retry about to happen: the attempt that failed, why, and how long the client waits before the next. */
export interface RetryInfo {
  attempt: number;
  status: number | null;
  reason: string;
  delay_ms: number;
}

/**
 * Per-call options: `signal` aborts the call (and any wait between attempts); `onRetry` hears each retry;
 * `onDelta` hears the reply's text as it streams (streaming on), an attempt retried starting over.
 */
export interface CompleteOptions {
  signal?: AbortSignal;
  onRetry?: (retry: RetryInfo) => void;
  onDelta?: (text: string) => void;
}

/** What the loop talks to; the OpenAI client below in production, a scripted model in unit tests. */
export interface Model {
  complete(request: ModelRequest, options?: CompleteOptions): Promise<ModelReply>;
  /** The endpoint's last known state (a real endpoint's; a scripted model has none). */
  health?(): ModelHealth;
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
  /** Ask for the reply as a stream of chunks (AGENT_MODEL_STREAM); off by default. */
  stream?: boolean;
  /** How long a streamed reply may go without a chunk before the attempt is abandoned (default 60 s). */
  stallMs?: number;
  /** The most characters of text and tool-call arguments a streamed reply may carry (default 1,000,000). */
  maxReplyChars?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * What the agent-server last saw of its model endpoint, for /health: `unknown` before the first call, `ok`
 * once it answered (an error about one request's content — 400, 413, 422 — still counts: it answered),
 * `unreachable` when no answer came (refused, timed out, a TLS failure), `error` when it answered with any
 * other error status (a refused key, a wrong URL or model name, a rate limit, a server error).
 */
export interface ModelHealth {
  url: string;
  /** The provider spoken to the endpoint (AGENT_PROVIDER): `openai-chat`, `openai-responses`, `anthropic`. */
  provider?: string;
  state: 'unknown' | 'ok' | 'unreachable' | 'error';
  /** The HTTP status of the last error answer. */
  status?: number;
  /** What went wrong, as a task that failed on it would say. */
  error?: string;
  /** When the state was last seen (ISO time). */
  at?: string;
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

/** The SDK client both APIs use: its own retries off (it cannot be told our attempt budget and deadline). */
export function openAIClient(opts: OpenAIModelOptions): OpenAI {
  return new OpenAI({
    apiKey: opts.apiKey ?? 'unused',
    baseURL: opts.baseURL,
    maxRetries: 0,
    timeout: opts.timeoutMs,
    fetch: opts.fetch,
  });
}

/** What bounds one streamed attempt of a client made with these options. */
export function streamLimits(opts: OpenAIModelOptions, endpoint: string) {
  return {
    endpoint,
    timeoutMs: opts.timeoutMs,
    stallMs: opts.stallMs ?? 60_000,
    maxChars: opts.maxReplyChars ?? 1_000_000,
  };
}

/** One attempt of a model call; `seen('ok')` once the endpoint answered. */
export type Attempt = (
  request: ModelRequest,
  options: CompleteOptions,
  seen: (state: 'ok') => void,
) => Promise<Omit<ModelReply, 'attempts'>>;

/** How an API's client errors are judged: what a failure means (model-errors.ts), and whether it is an abort. */
export interface ErrorJudge {
  describe(err: unknown, timeoutMs: number, endpoint: string, keySet: boolean): Failure;
  aborted(err: unknown): boolean;
}

/** The `openai` SDK's errors (chat completions, the Responses API). */
const OPENAI_ERRORS: ErrorJudge = { describe, aborted: (err) => err instanceof APIUserAbortError };

/**
 * toolshift's retry policy around one attempt, whatever the API: 408/409/429/5xx and network errors retried
 * with backoff (or what Retry-After asks) up to the attempt budget, others failed at once; the endpoint's
 * state kept for /health. `judge`: how the API's client says what went wrong (the `openai` SDK's by default).
 */
export function retryingModel(
  opts: OpenAIModelOptions,
  endpoint: string,
  ask: Attempt,
  judge: ErrorJudge = OPENAI_ERRORS,
): Model {
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const baseDelay = opts.baseDelayMs ?? 500;
  let health: ModelHealth = { url: endpoint, state: 'unknown' };
  const seen = (state: ModelHealth['state'], failure?: Failure) => {
    health = {
      url: endpoint,
      state,
      ...(failure && state !== 'ok'
        ? { ...(failure.status !== undefined ? { status: failure.status } : {}), error: failure.message }
        : {}),
      at: new Date().toISOString(),
    };
  };
  return {
    health: () => ({ ...health }),
    async complete(request, options = {}) {
      const { signal } = options;
      const stopped = () =>
        signal?.reason instanceof TaskStoppedError ? signal.reason : new TaskStoppedError('cancelled');
      for (let attempt = 1; ; attempt++) {
        if (signal?.aborted) throw stopped();
        try {
          return { ...(await ask(request, options, seen)), attempts: attempt };
        } catch (err) {
          if (err instanceof ModelError) throw err;
          if (signal?.aborted || judge.aborted(err)) throw stopped();
          const failure = judge.describe(err, opts.timeoutMs, endpoint, opts.apiKey !== undefined);
          seen(failure.state, failure);
          if (!failure.retry) throw new ModelError(`Model call failed: ${failure.message}`);
          if (attempt >= opts.maxAttempts) {
            const attempts = attempt === 1 ? '1 attempt' : `${attempt} attempts`;
            throw new ModelError(`Model call failed after ${attempts}: ${failure.message}`);
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

/** Whether `baseURL` is OpenAI's own API (its host, or one of its subdomains). */
function isOpenAI(baseURL: string): boolean {
  try {
    const host = new URL(baseURL).hostname;
    return host === 'api.openai.com' || host.endsWith('.openai.com');
  } catch {
    return false;
  }
}

/** A Model over any OpenAI-compatible endpoint's chat completions, under toolshift's retry policy. */
export function openAIModel(opts: OpenAIModelOptions): Model {
  const client = openAIClient(opts);
  const limits = streamLimits(opts, client.baseURL);
  // `prompt_cache_key` is OpenAI's own field: other chat-completions servers may refuse what they do not know.
  const cacheKeys = isOpenAI(client.baseURL);
  /** One attempt: the whole reply at once, or (streaming on) put together from its chunks as they come. */
  return retryingModel(opts, client.baseURL, async (request, { signal, onDelta }, seen) => {
    // No tools, no `tools` (some providers refuse an empty array): a summary is asked without them.
    const body = {
      model: request.model,
      messages: request.messages,
      ...(request.tools.length > 0 ? { tools: request.tools } : {}),
      ...(request.cacheKey && cacheKeys ? { prompt_cache_key: request.cacheKey } : {}),
    };
    if (!opts.stream) {
      const res = await client.chat.completions.create(body, { signal });
      seen('ok');
      return replyOf(res, client.baseURL);
    }
    const open = async (attempt: AbortSignal) => {
      const res = await client.chat.completions
        .create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal: attempt })
        .asResponse();
      seen('ok');
      return res;
    };
    return replyOf(await streamAttempt(open, limits, signal, chatReader(limits, onDelta)), client.baseURL);
  });
}

/** The reply a completion carries; no usage in it is said (`usage_missing`), not passed off as zero tokens. */
function replyOf(res: ChatCompletion, endpoint: string): Omit<ModelReply, 'attempts'> {
  const message = res.choices[0]?.message;
  if (!message) throw new ModelError(`the model endpoint ${endpoint} returned no choices`);
  return {
    // A refusal (a provider's own field) is the answer, said as one: the task ends with it, not with nothing.
    content: message.content ?? (message.refusal ? refusalText(message.refusal) : null),
    tool_calls: (message.tool_calls ?? []).filter(
      (c): c is ChatCompletionMessageFunctionToolCall => c.type === 'function',
    ),
    finish_reason: res.choices[0]?.finish_reason ?? null,
    usage: {
      prompt_tokens: res.usage?.prompt_tokens ?? 0,
      completion_tokens: res.usage?.completion_tokens ?? 0,
      total_tokens: res.usage?.total_tokens ?? 0,
    },
    ...(res.usage ? {} : { usage_missing: true as const }),
    ...(typeof res.model === 'string' ? { model: res.model } : {}),
    ...(typeof res.id === 'string' ? { id: res.id } : {}),
    ...(typeof res.usage?.prompt_tokens_details?.cached_tokens === 'number'
      ? { cached_tokens: res.usage.prompt_tokens_details.cached_tokens }
      : {}),
  };
}

/** A model's refusal as the reply's text. */
export function refusalText(refusal: string): string {
  return `The model refused: ${refusal}`;
}
