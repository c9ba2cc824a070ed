import type {
  ChatCompletionContentPart,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type {
  FunctionTool,
  Response,
  ResponseCreateParamsNonStreaming,
  ResponseInputContent,
  ResponseInputItem,
} from 'openai/resources/responses/responses';
import { ModelError } from '../errors.ts';
import {
  type Model,
  type ModelReply,
  type ModelRequest,
  type OpenAIModelOptions,
  openAIClient,
  refusalText,
  retryingModel,
  streamLimits,
} from './model.ts';
import { responsesReader } from './model-responses-stream.ts';
import { MAX_TOOL_CALLS, type StreamLimits, streamAttempt, tooLong } from './model-stream.ts';

// The OpenAI Responses API behind the same Model the loop talks to: the loop's chat-shaped conversation sent
// whole each time (`store: false`, nothing kept at the provider), the reply read back into the chat shape, under
// the same retry policy, stream reading and bounds as chat completions (model.ts, model-stream.ts).

/** The body of one Responses request (the stream flag aside). */
type ResponsesBody = ResponseCreateParamsNonStreaming;

/** A chat message's content as text: a string as is, its text parts joined (a refusal part as its words). */
function textOf(
  content: string | readonly { type: string; text?: string; refusal?: string }[] | null | undefined,
) {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  return content.map((p) => (p.type === 'text' ? (p.text ?? '') : (p.refusal ?? ''))).join('');
}

/** A user message's parts as Responses input content: text and images (what the loop can hold). */
function userContent(parts: ChatCompletionContentPart[]): ResponseInputContent[] {
  return parts.map((p): ResponseInputContent => {
    if (p.type === 'text') return { type: 'input_text', text: p.text };
    if (p.type === 'image_url') {
      return { type: 'input_image', image_url: p.image_url.url, detail: p.image_url.detail ?? 'auto' };
    }
    throw new ModelError(
      `a user message's ${p.type} part cannot be sent to the Responses API (text and images can)`,
    );
  });
}

/** One chat message as Responses input items: an assistant's text and each of its calls, a tool's output. */
function inputItems(m: ChatCompletionMessageParam): ResponseInputItem[] {
  switch (m.role) {
    case 'system':
    case 'developer':
      return [{ role: m.role, content: textOf(m.content) }];
    case 'user':
      return [{ role: 'user', content: typeof m.content === 'string' ? m.content : userContent(m.content) }];
    case 'assistant': {
      const text = textOf(m.content);
      const calls = (m.tool_calls ?? []).filter((c) => c.type === 'function');
      return [
        ...(text ? [{ role: 'assistant' as const, content: text }] : []),
        ...calls.map((c) => ({
          type: 'function_call' as const,
          call_id: c.id,
          name: c.function.name,
          arguments: c.function.arguments,
        })),
      ];
    }
    case 'tool':
      return [{ type: 'function_call_output', call_id: m.tool_call_id, output: textOf(m.content) }];
    default:
      throw new ModelError(`a ${m.role} message cannot be sent to the Responses API`);
  }
}

/** A chat function tool as a Responses one (not strict: the gateway's schemas are not written for it). */
function functionTool(t: ChatCompletionTool): FunctionTool[] {
  if (t.type !== 'function') return [];
  const { name, description, parameters } = t.function;
  return [
    {
      type: 'function',
      name,
      ...(description !== undefined ? { description } : {}),
      parameters: parameters ?? null,
      strict: false,
    },
  ];
}

/**
 * The Responses body of a loop's request: its leading system messages as `instructions`, the rest of the
 * conversation as input items, its function tools; nothing stored at the provider.
 */
function responsesBody(request: ModelRequest): ResponsesBody {
  const lead = request.messages.findIndex((m) => m.role !== 'system');
  const system = lead === -1 ? request.messages : request.messages.slice(0, lead);
  const rest = lead === -1 ? [] : request.messages.slice(lead);
  const tools = request.tools.flatMap(functionTool);
  return {
    model: request.model,
    ...(system.length > 0 ? { instructions: system.map((m) => textOf(m.content)).join('\n\n') } : {}),
    input: rest.flatMap(inputItems),
    ...(tools.length > 0 ? { tools } : {}),
    store: false,
    ...(request.cacheKey ? { prompt_cache_key: request.cacheKey } : {}),
  };
}

/** Why the response stopped, in chat's words: `length` when cut off at the output limit (the loop's cue). */
function finishOf(res: Response, calls: number): string {
  if (res.status === 'incomplete') {
    const reason = res.incomplete_details?.reason;
    return reason === 'max_output_tokens' ? 'length' : (reason ?? 'incomplete');
  }
  return calls > 0 ? 'tool_calls' : 'stop';
}

/**
 * The reply a response carries: its messages' text (a refusal said as one), its function calls by `call_id`,
 * its usage (none said as `usage_missing`); a reply past the bounds is refused, as a streamed one would be.
 */
function replyOfResponse(res: Response, limits: StreamLimits): Omit<ModelReply, 'attempts'> {
  if (res.status === 'failed' || res.status === 'cancelled') {
    const said = res.error?.message ?? 'no message';
    throw new ModelError(
      `Model call failed: the model endpoint ${limits.endpoint} answered ${res.status}: ${said}`,
    );
  }
  let text: string | null = null;
  let refusal: string | null = null;
  const calls: ChatCompletionMessageFunctionToolCall[] = [];
  let chars = 0;
  for (const item of res.output ?? []) {
    if (item.type === 'message') {
      for (const part of item.content) {
        if (part.type === 'output_text') text = (text ?? '') + part.text;
        else if (part.type === 'refusal') refusal = (refusal ?? '') + part.refusal;
        chars += part.type === 'output_text' ? part.text.length : part.refusal.length;
      }
    } else if (item.type === 'function_call') {
      if (calls.length >= MAX_TOOL_CALLS) throw tooLong(limits, `${MAX_TOOL_CALLS} tool calls`);
      calls.push({
        id: item.call_id,
        type: 'function',
        function: { name: item.name, arguments: item.arguments },
      });
      chars += item.arguments.length;
    }
    if (chars > limits.maxChars) throw tooLong(limits, `${limits.maxChars} characters`);
  }
  const usage = res.usage;
  return {
    content: text ?? (refusal !== null ? refusalText(refusal) : null),
    tool_calls: calls,
    finish_reason:
      refusal !== null && text === null && calls.length === 0 ? 'refusal' : finishOf(res, calls.length),
    usage: {
      prompt_tokens: usage?.input_tokens ?? 0,
      completion_tokens: usage?.output_tokens ?? 0,
      total_tokens: usage?.total_tokens ?? (usage ? usage.input_tokens + usage.output_tokens : 0),
    },
    ...(usage ? {} : { usage_missing: true as const }),
    ...(typeof res.model === 'string' ? { model: res.model } : {}),
    ...(typeof res.id === 'string' ? { id: res.id } : {}),
    ...(typeof usage?.input_tokens_details?.cached_tokens === 'number'
      ? { cached_tokens: usage.input_tokens_details.cached_tokens }
      : {}),
  };
}

/**
 * A Model over the OpenAI Responses API (`POST /responses`), stateless: each call sends the whole
 * conversation, as chat completions do, so a retried, resumed or moved task needs nothing kept at the provider.
 */
export function openAIResponsesModel(opts: OpenAIModelOptions): Model {
  const client = openAIClient(opts);
  const limits = streamLimits(opts, client.baseURL);
  return retryingModel(opts, client.baseURL, async (request, { signal, onDelta }, seen) => {
    const body = responsesBody(request);
    if (!opts.stream) {
      const res = await client.responses.create(body, { signal });
      seen('ok');
      return replyOfResponse(res, limits);
    }
    const open = async (attempt: AbortSignal) => {
      const res = await client.responses.create({ ...body, stream: true }, { signal: attempt }).asResponse();
      seen('ok');
      return res;
    };
    return replyOfResponse(
      await streamAttempt(open, limits, signal, responsesReader(limits, onDelta)),
      limits,
    );
  });
}
