import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk';
import type { Message } from '@anthropic-ai/sdk/resources/messages/messages';
import { ModelError, TaskStoppedError } from '../errors.ts';
import { paramsOf, replyOf } from './anthropic-map.ts';
import { anthropicReader } from './anthropic-stream.ts';
import {
  abortable,
  type Model,
  type ModelHealth,
  type ModelReply,
  type ModelRequest,
  type OpenAIModelOptions,
} from './model.ts';
import {
  isTlsError,
  MAX_DELAY_MS,
  networkCause,
  plainMessage,
  REQUEST_ERRORS,
  retryAfterMs,
} from './model-errors.ts';
import { type Failure, StreamFailure, streamAttempt, tooLong } from './model-stream.ts';

// A Model over Anthropic's Messages API (the official @anthropic-ai/sdk), with toolshift's own retry policy,
// bounds and health, as openAIModel (model.ts) has them: the same events, the same failure messages.

/** The Anthropic client's settings: the OpenAI client's, and the output limit the API requires on each request. */
export interface AnthropicModelOptions extends Omit<OpenAIModelOptions, 'baseURL'> {
  baseURL?: string;
  /** `max_tokens` of each request (AGENT_MODEL_MAX_TOKENS). */
  maxTokens?: number;
}

const KEY_VARIABLE = 'ANTHROPIC_API_KEY';
const URL_VARIABLE = 'ANTHROPIC_BASE_URL';
/** 408, 409 and 429 wait and retry, as every 5xx (529: overloaded). */
const RETRYABLE = new Set([408, 409, 429]);

/** What the API's error body said (`{"type":"error","error":{"type","message"}}`), bounded. */
function providerText(err: InstanceType<typeof APIError>): string {
  const body = err.error as { error?: { type?: unknown; message?: unknown } } | undefined;
  const message = body?.error?.message;
  const type = body?.error?.type;
  let text =
    typeof message === 'string' && message
      ? `${typeof type === 'string' ? `${type}: ` : ''}${message}`
      : err.message.replace(new RegExp(`^${err.status}\\s*`), '');
  if (text === '' || text === 'status code (no body)') text = 'no message';
  if (/^<(!doctype|html|head|body)/i.test(text)) {
    text = /<title>([^<]*)<\/title>/i.exec(text)?.[1]?.trim() || 'an HTML page';
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** A billing stop: no credit left, waiting does not fix it (Anthropic answers 400 or 402 with this). */
function isQuota(err: InstanceType<typeof APIError>): boolean {
  return err.status === 402 || /credit balance|billing/i.test(providerText(err));
}

function describe(err: unknown, timeoutMs: number, endpoint: string, keySet: boolean): Failure {
  if (err instanceof StreamFailure) return err.failure;
  if (err instanceof APIError && err.status !== undefined) {
    const retry = !isQuota(err) && (RETRYABLE.has(err.status) || err.status >= 500);
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
      state: REQUEST_ERRORS.has(err.status) && !isQuota(err) ? 'ok' : 'error',
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
            `https (${URL_VARIABLE} may need http://), and is its certificate trusted (NODE_EXTRA_CA_CERTS)?`
          : `cannot reach the model endpoint ${endpoint} (${cause}): is the server running, and is ${URL_VARIABLE} right?`,
    };
  }
  return { retry: false, state: 'error', message: (err as Error).message };
}

/** A reply without streaming is bounded as a streamed one is: its text and tool inputs, its tool calls. */
function bounded(message: Message, limits: { endpoint: string; maxChars: number }) {
  let chars = 0;
  let calls = 0;
  for (const b of message.content ?? []) {
    if (b.type === 'text') chars += b.text.length;
    if (b.type === 'tool_use') {
      calls++;
      chars += JSON.stringify(b.input ?? {}).length;
    }
  }
  const l = { ...limits, timeoutMs: 0, stallMs: 0 };
  if (chars > limits.maxChars) throw tooLong(l, `${limits.maxChars} characters`);
  if (calls > 256) throw tooLong(l, '256 tool calls');
  return message;
}

/** A Model over Anthropic's Messages API, retrying 408/409/429/5xx (529 overloaded) and network errors. */
export function anthropicModel(opts: AnthropicModelOptions): Model {
  const client = new Anthropic({
    // A key given in code is the client's only credential: the SDK reads no variable or profile for another.
    // A local proxy may need none, and the SDK sends none only with one of its own credentials.
    apiKey: opts.apiKey ?? 'unused',
    baseURL: opts.baseURL ?? 'https://api.anthropic.com',
    maxRetries: 0,
    timeout: opts.timeoutMs,
    fetch: opts.fetch,
  });
  const endpoint = client.baseURL;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const baseDelay = opts.baseDelayMs ?? 500;
  const maxTokens = opts.maxTokens ?? 8192;
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
  const limits = {
    endpoint,
    timeoutMs: opts.timeoutMs,
    stallMs: opts.stallMs ?? 60_000,
    maxChars: opts.maxReplyChars ?? 1_000_000,
  };
  const ask = async (
    request: ModelRequest,
    signal: AbortSignal | undefined,
    onDelta?: (text: string) => void,
  ): Promise<Omit<ModelReply, 'attempts'>> => {
    const body = paramsOf(request, maxTokens);
    if (!opts.stream) {
      const message = await client.messages.create({ ...body, stream: false }, { signal });
      seen('ok');
      return replyOf(bounded(message, limits));
    }
    const open = async (attempt: AbortSignal) => {
      const res = await client.messages.create({ ...body, stream: true }, { signal: attempt }).asResponse();
      seen('ok');
      return res;
    };
    const message = await streamAttempt(open, limits, signal, anthropicReader(limits, onDelta));
    return replyOf(bounded(message, limits));
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
          return { ...(await ask(request, signal, options.onDelta)), attempts: attempt };
        } catch (err) {
          if (err instanceof ModelError) throw err;
          if (signal?.aborted || err instanceof APIUserAbortError) throw stopped();
          const failure = describe(err, opts.timeoutMs, endpoint, opts.apiKey !== undefined);
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
