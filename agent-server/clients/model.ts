import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type {
  ChatCompletion,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { Usage } from '../contract.ts';
import { ModelError, TaskStoppedError } from '../errors.ts';
import { type Failure, StreamFailure, streamAttempt } from './model-stream.ts';

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

const RETRYABLE = new Set([408, 409, 429]);
export const MAX_DELAY_MS = 60_000;

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

/** The network error under an SDK connection error: its code and its message (ECONNREFUSED, ENOTFOUND …). */
export function networkCause(err: unknown): { code?: string; message?: string } {
  let cause = (err as { cause?: unknown }).cause;
  for (let depth = 0; cause && depth < 4; depth++) {
    const { code, message } = cause as { code?: unknown; message?: unknown };
    if (typeof code === 'string') return { code, message: typeof message === 'string' ? message : undefined };
    cause = (cause as { cause?: unknown }).cause;
  }
  const message = (err as { cause?: { message?: unknown } }).cause?.message;
  return { message: typeof message === 'string' && message ? message : undefined };
}

/** OpenSSL's `…:SSL routines:ssl3_get_record:wrong version number:…` as `wrong version number`; others trimmed. */
export function plainMessage(message: string | undefined): string | undefined {
  if (!message) return undefined;
  const ssl = /SSL routines:[^:]*:([^:]+)/.exec(message);
  return (ssl ? ssl[1] : message).trim().split('\n')[0];
}

/** Codes of a TLS failure: the handshake, or a certificate Node does not trust. */
export function isTlsError(code: string): boolean {
  return /^(ERR_SSL_|ERR_TLS_|EPROTO$)|CERT|_SIGNATURE$|SELF_SIGNED|^UNABLE_TO_/.test(code);
}

/** The configuration variable of the model's API key (lib/config/config.ts). */
const KEY_VARIABLE = 'OPENAI_API_KEY';

/** What a provider's error body said, without the status the SDK puts in front of it (often more than once). */
function providerText(err: InstanceType<typeof APIError>): string {
  const status = String(err.status);
  let text = err.message;
  // The SDK's message is `<status> <provider message>`; a provider's own message may start with it again
  // ("401 Unauthorized"), and one without a body reads `<status> status code (no body)`.
  while (text.startsWith(status)) text = text.slice(status.length).trim();
  if (text === '' || text === 'status code (no body)') return 'no message';
  // `{"error": "Unauthorized"}`: the SDK quotes the string.
  if (/^"[^"]*"$/.test(text)) text = text.slice(1, -1);
  // An HTML error page (a proxy's): its title, not its markup.
  if (/^<(!doctype|html|head|body)/i.test(text)) {
    const title = /<title>([^<]*)<\/title>/i.exec(text)?.[1]?.trim();
    text = title ? title.replace(new RegExp(`^${status}\\s*`), '') || title : 'an HTML page';
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** Statuses about the one request (its size, its content): the endpoint itself works. */
export const REQUEST_ERRORS = new Set([400, 413, 422]);

function describe(err: unknown, timeoutMs: number, endpoint: string, keySet: boolean): Failure {
  if (err instanceof StreamFailure) return err.failure;
  if (err instanceof APIError && err.status !== undefined) {
    // An exhausted quota is a 429 that waiting does not fix: fail at once with the provider's message.
    const quota = err.code === 'insufficient_quota' || (err.type ?? '') === 'insufficient_quota';
    const retry = !quota && (RETRYABLE.has(err.status) || err.status >= 500);
    const key =
      err.status === 401 || err.status === 403
        ? keySet
          ? ` (the endpoint refused the API key in ${KEY_VARIABLE}: check it, and that it may use this model)`
          : ` (no API key was sent: set ${KEY_VARIABLE})`
        : '';
    return {
      retry,
      message: `model endpoint ${endpoint} answered ${err.status}: ${providerText(err)}${key}`,
      delay: retryAfterMs(err.headers),
      status: err.status,
      state: REQUEST_ERRORS.has(err.status) ? 'ok' : 'error',
    };
  }
  if (err instanceof APIConnectionError) {
    if (err instanceof APIConnectionTimeoutError) {
      return {
        retry: true,
        state: 'unreachable',
        message: `model call to ${endpoint} timed out after ${timeoutMs} ms (AGENT_MODEL_TIMEOUT_MS)`,
      };
    }
    const { code, message } = networkCause(err);
    const said = plainMessage(message);
    const cause = code ? (said && said !== code ? `${code}: ${said}` : code) : (said ?? err.message);
    return {
      retry: true,
      state: 'unreachable',
      message:
        code && isTlsError(code)
          ? `the TLS connection to the model endpoint ${endpoint} failed (${cause}): does the server speak ` +
            'https (OPENAI_BASE_URL may need http://), and is its certificate trusted (NODE_EXTRA_CA_CERTS)?'
          : `cannot reach the model endpoint ${endpoint} (${cause}): is the server running, and is OPENAI_BASE_URL right?`,
    };
  }
  return { retry: false, state: 'error', message: (err as Error).message };
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
export function abortable(
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
  let health: ModelHealth = { url: client.baseURL, state: 'unknown' };
  const seen = (state: ModelHealth['state'], failure?: Failure) => {
    health = {
      url: client.baseURL,
      state,
      ...(failure && state !== 'ok'
        ? { ...(failure.status !== undefined ? { status: failure.status } : {}), error: failure.message }
        : {}),
      at: new Date().toISOString(),
    };
  };
  const limits = {
    endpoint: client.baseURL,
    timeoutMs: opts.timeoutMs,
    stallMs: opts.stallMs ?? 60_000,
    maxChars: opts.maxReplyChars ?? 1_000_000,
  };
  /** One attempt: the whole reply at once, or (streaming on) put together from its chunks as they come. */
  const ask = async (request: ModelRequest, { signal, onDelta }: CompleteOptions) => {
    // No tools, no `tools` (some providers refuse an empty array): a summary is asked without them.
    const body = {
      model: request.model,
      messages: request.messages,
      ...(request.tools.length > 0 ? { tools: request.tools } : {}),
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
    return replyOf(await streamAttempt(open, limits, signal, onDelta), client.baseURL);
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
          return { ...(await ask(request, options)), attempts: attempt };
        } catch (err) {
          if (err instanceof ModelError) throw err;
          if (signal?.aborted || err instanceof APIUserAbortError) throw stopped();
          const failure = describe(err, opts.timeoutMs, client.baseURL, opts.apiKey !== undefined);
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

/** The reply a completion carries; no usage in it is said (`usage_missing`), not passed off as zero tokens. */
function replyOf(res: ChatCompletion, endpoint: string): Omit<ModelReply, 'attempts'> {
  const message = res.choices[0]?.message;
  if (!message) throw new ModelError(`the model endpoint ${endpoint} returned no choices`);
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
    ...(res.usage ? {} : { usage_missing: true as const }),
    ...(typeof res.model === 'string' ? { model: res.model } : {}),
    ...(typeof res.id === 'string' ? { id: res.id } : {}),
    ...(typeof res.usage?.prompt_tokens_details?.cached_tokens === 'number'
      ? { cached_tokens: res.usage.prompt_tokens_details.cached_tokens }
      : {}),
  };
}
