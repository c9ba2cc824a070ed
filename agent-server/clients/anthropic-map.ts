import type {
  ContentBlockParam,
  Message,
  MessageCreateParamsBase,
  MessageParam,
  TextBlockParam,
  Tool,
} from '@anthropic-ai/sdk/resources/messages/messages';
import type {
  ChatCompletionContentPart,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { ModelReply, ModelRequest } from './model.ts';

// The conversation the loop keeps (chat-completions shaped: system, user, assistant with tool calls, tool
// results) as a Messages API request, and a Message back as the loop's reply. Prompt caching is explicit on
// this API: up to four `cache_control` breakpoints, each caching the prefix up to it. They go where the prefix
// stays the same from one request to the next: the last tool definition (the tools come first), the system
// prompt, the end of the previous request's conversation (what it cached is read back) and the end of this
// one (what the next request reads).

const EPHEMERAL = { type: 'ephemeral' } as const;

/** A breakpoint on a block (the block's own fields kept). */
function cached<T extends object>(block: T): T & { cache_control: typeof EPHEMERAL } {
  return { ...block, cache_control: EPHEMERAL };
}

/** The text of a message's content, its parts joined (images and audio have no text). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p: { type?: string; text?: unknown }) =>
      p.type === 'text' && typeof p.text === 'string' ? p.text : '',
    )
    .join('');
}

/** A user part as a Messages block: text, or an image given inline as a data URL (others become a note). */
function userBlock(part: ChatCompletionContentPart): ContentBlockParam | undefined {
  if (part.type === 'text') return part.text.trim() ? { type: 'text', text: part.text } : undefined;
  if (part.type === 'image_url') {
    const m = /^data:(image\/(?:png|jpeg|gif|webp));base64,(.*)$/s.exec(part.image_url.url);
    if (m) return { type: 'image', source: { type: 'base64', media_type: m[1] as 'image/png', data: m[2] } };
    return { type: 'image', source: { type: 'url', url: part.image_url.url } };
  }
  return { type: 'text', text: `[${part.type} left out: this provider is sent text and images only]` };
}

/** A tool call's arguments as the object the API wants (arguments that are not a JSON object are kept whole). */
function inputOf(args: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(args || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      return parsed as Record<string, unknown>;
  } catch {}
  return { arguments: args };
}

/** One chat message as the blocks of a Messages turn, and whose turn it is. */
function blocksOf(m: ChatCompletionMessageParam): {
  role: 'user' | 'assistant';
  blocks: ContentBlockParam[];
} {
  if (m.role === 'assistant') {
    const text = textOf(m.content);
    const calls = (m.tool_calls ?? []).filter(
      (c): c is ChatCompletionMessageFunctionToolCall => c.type === 'function',
    );
    return {
      role: 'assistant',
      blocks: [
        // The API refuses a text block of nothing but white space.
        ...(text.trim() ? [{ type: 'text' as const, text }] : []),
        ...calls.map((c) => ({
          type: 'tool_use' as const,
          id: c.id,
          name: c.function.name,
          input: inputOf(c.function.arguments),
        })),
      ],
    };
  }
  if (m.role === 'tool') {
    const text = textOf(m.content);
    return {
      role: 'user',
      blocks: [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: text || '(no output)' }],
    };
  }
  if (m.role === 'user' && Array.isArray(m.content)) {
    return { role: 'user', blocks: m.content.flatMap((p) => userBlock(p) ?? []) };
  }
  // A user message, or a system note past the conversation's start (the API has one system prompt).
  const text = textOf(m.content);
  const said = m.role === 'user' ? text : `[system] ${text}`;
  return { role: 'user', blocks: said.trim() ? [{ type: 'text', text: said }] : [] };
}

/** The system prompt (the conversation's leading system messages) and the turns after it, same roles merged. */
function conversationOf(messages: readonly ChatCompletionMessageParam[]): {
  system: TextBlockParam[];
  turns: MessageParam[];
} {
  const system: TextBlockParam[] = [];
  let i = 0;
  for (; i < messages.length; i++) {
    const m = messages[i] as ChatCompletionMessageParam;
    if (m.role !== 'system' && m.role !== 'developer') break;
    const text = textOf(m.content);
    if (text.trim()) system.push({ type: 'text', text });
  }
  const turns: { role: 'user' | 'assistant'; content: ContentBlockParam[] }[] = [];
  for (const m of messages.slice(i)) {
    const { role, blocks } = blocksOf(m);
    if (blocks.length === 0) continue;
    const last = turns.at(-1);
    // Tool results and the note after them are one user turn; the API wants the roles to alternate.
    if (last?.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  }
  // The API's conversation starts with the user.
  if (turns[0]?.role === 'assistant')
    turns.unshift({ role: 'user', content: [{ type: 'text', text: '(start)' }] });
  return { system, turns };
}

/** A function tool as a Messages tool: the same name, description and JSON Schema. */
function toolOf(t: ChatCompletionTool): Tool | undefined {
  if (t.type !== 'function') return undefined;
  const schema = (t.function.parameters ?? {}) as Record<string, unknown>;
  return {
    name: t.function.name,
    ...(t.function.description ? { description: t.function.description } : {}),
    input_schema: { ...schema, type: 'object' },
  };
}

/** Breakpoints on the last block of the last user turn and of the user turn before it (the previous request's end). */
function markTurns(turns: MessageParam[]): void {
  const users = turns.flatMap((t, i) => (t.role === 'user' ? [i] : []));
  for (const i of users.slice(-2)) {
    const turn = turns[i] as MessageParam;
    const blocks = turn.content as ContentBlockParam[];
    const last = blocks.length - 1;
    // Thinking blocks take no breakpoint; the loop's turns never hold one.
    const block = blocks[last] as ContentBlockParam;
    if (block.type === 'thinking' || block.type === 'redacted_thinking') continue;
    blocks[last] = cached(block);
  }
}

/** The Messages request of a loop's request, its cache breakpoints placed (four at most). */
export function paramsOf(request: ModelRequest, maxTokens: number): MessageCreateParamsBase {
  const { system, turns } = conversationOf(request.messages);
  const tools = request.tools.flatMap((t) => toolOf(t) ?? []);
  if (tools.length > 0) tools[tools.length - 1] = cached(tools[tools.length - 1] as Tool);
  if (system.length > 0) system[system.length - 1] = cached(system[system.length - 1] as TextBlockParam);
  markTurns(turns);
  return {
    model: request.model,
    max_tokens: maxTokens,
    messages: turns,
    ...(system.length > 0 ? { system } : {}),
    ...(tools.length > 0 ? { tools } : {}),
  };
}

/** Why the model stopped, in the loop's words: `length` is a cut-off, `content_filter` a refusal. */
function finishOf(stop: string | null | undefined): string {
  switch (stop) {
    case 'tool_use':
      return 'tool_calls';
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/** What a reply that the model declined says (after its own text, if any): the task ends with it. */
const REFUSAL_NOTE = 'The model declined to answer (stop_reason: refusal).';

/** Usage as the loop counts it: the prompt is input, cache reads and cache writes together. */
function usageOf(u: {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}): Pick<ModelReply, 'usage' | 'cached_tokens' | 'cache_write_tokens'> {
  const read = u.cache_read_input_tokens ?? 0;
  const write = u.cache_creation_input_tokens ?? 0;
  const prompt = (u.input_tokens ?? 0) + read + write;
  const completion = u.output_tokens ?? 0;
  return {
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    cached_tokens: read,
    cache_write_tokens: write,
  };
}

/** A Message's text and tool calls, why it stopped and its usage, as the loop's reply. */
export function replyOf(
  message: Pick<Message, 'content' | 'stop_reason' | 'usage'> & { id?: string; model?: string },
): Omit<ModelReply, 'attempts'> {
  const text = message.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
  const finish = finishOf(message.stop_reason);
  // A refusal's tool calls are not run; what it said is kept, with why it stopped.
  const calls =
    finish === 'content_filter'
      ? []
      : message.content.flatMap((b) =>
          b.type === 'tool_use'
            ? [
                {
                  id: b.id,
                  type: 'function' as const,
                  function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
                },
              ]
            : [],
        );
  const content = finish === 'content_filter' ? (text ? `${text}\n\n${REFUSAL_NOTE}` : REFUSAL_NOTE) : text;
  return {
    content: content === '' && calls.length > 0 ? null : content,
    tool_calls: calls,
    finish_reason: finish,
    ...usageOf(message.usage ?? {}),
    ...(message.usage ? {} : { usage_missing: true as const }),
    ...(typeof message.model === 'string' ? { model: message.model } : {}),
    ...(typeof message.id === 'string' ? { id: message.id } : {}),
  };
}
