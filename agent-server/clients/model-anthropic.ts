import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk';
import type { Message } from '@anthropic-ai/sdk/resources/messages/messages';
import { paramsOf, replyOf } from './anthropic-map.ts';
import { anthropicReader } from './anthropic-stream.ts';
import { type Model, type OpenAIModelOptions, retryingModel, streamLimits } from './model.ts';
import { describer, providerText, type SdkApiError } from './model-errors.ts';
import { MAX_TOOL_CALLS, type StreamLimits, streamAttempt, tooLong } from './model-stream.ts';

// A Model over Anthropic's Messages API (the official @anthropic-ai/sdk), with toolshift's own retry policy,
// bounds and health, as openAIModel (model.ts) has them: the same events, the same failure messages.

/** The Anthropic client's settings: the OpenAI client's, and the output limit the API requires on each request. */
export interface AnthropicModelOptions extends OpenAIModelOptions {
  /** `max_tokens` of each request (AGENT_MODEL_MAX_TOKENS). */
  maxTokens?: number;
}

const KEY_VARIABLE = 'ANTHROPIC_API_KEY';
const URL_VARIABLE = 'ANTHROPIC_BASE_URL';
/** What the API's error body said (`{"type":"error","error":{"type","message"}}`), else the SDK's message. */
function anthropicText(err: SdkApiError): string {
  const body = (err as { error?: unknown }).error as
    | { error?: { type?: unknown; message?: unknown } }
    | undefined;
  const message = body?.error?.message;
  const type = body?.error?.type;
  if (typeof message !== 'string' || !message) return providerText(err);
  const text = `${typeof type === 'string' ? `${type}: ` : ''}${message}`;
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/**
 * The SDK's failures, judged as the OpenAI client's are (408, 409, 429 and every 5xx — 529: overloaded — retried),
 * a billing stop (no credit left: 402, or a 400 saying so) failed at once.
 */
const describe = describer(
  { APIError, APIConnectionError, APIConnectionTimeoutError },
  {
    key: KEY_VARIABLE,
    url: URL_VARIABLE,
    text: anthropicText,
    quota: (err, text) => err.status === 402 || /credit balance|billing/i.test(text),
  },
);

/** A reply without streaming is bounded as a streamed one is (its reader counts as the events come). */
function bounded(message: Message, limits: StreamLimits) {
  let chars = 0;
  let calls = 0;
  for (const b of message.content ?? []) {
    if (b.type === 'text') chars += b.text.length;
    if (b.type === 'tool_use') {
      calls++;
      chars += JSON.stringify(b.input ?? {}).length;
    }
  }
  if (chars > limits.maxChars) throw tooLong(limits, `${limits.maxChars} characters`);
  if (calls > MAX_TOOL_CALLS) throw tooLong(limits, `${MAX_TOOL_CALLS} tool calls`);
  return message;
}

/** A Model over Anthropic's Messages API, retrying 408/409/429/5xx (529 overloaded) and network errors. */
export function anthropicModel(opts: AnthropicModelOptions): Model {
  const client = new Anthropic({
    // A key given in code is the client's only credential: the SDK reads no variable or profile for another.
    // A local proxy may need none, and the SDK sends none only with one of its own credentials.
    apiKey: opts.apiKey ?? 'unused',
    baseURL: opts.baseURL,
    maxRetries: 0,
    timeout: opts.timeoutMs,
    fetch: opts.fetch,
  });
  const endpoint = client.baseURL;
  const maxTokens = opts.maxTokens ?? 8192;
  const limits = streamLimits(opts, endpoint);
  /** One attempt: the whole reply at once, or (streaming on) put together from its events as they come. */
  return retryingModel(
    opts,
    endpoint,
    async (request, { signal, onDelta }, seen) => {
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
      return replyOf(await streamAttempt(open, limits, signal, anthropicReader(limits, onDelta)));
    },
    { describe, aborted: (err) => err instanceof APIUserAbortError },
  );
}
