import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import {
  ATTRIBUTE_VALUE_LIMIT,
  GENAI,
  ROOT_CONTEXT,
  type ServiceTracing,
  type Span,
  SpanKind,
  TOOLSHIFT,
  trace,
} from '../../lib/telemetry/tracing.ts';
import type { ModelReply } from '../clients/model.ts';
import type { ToolExposure } from '../contract.ts';

// What a task's spans are made of, apart from the spans themselves (trace.ts): a stored attempt and the link
// to it, the conversation in the GenAI conventions' message shape, and an event's data as attributes.

/** What a pause or a checkpoint keeps of the task's trace: the attempt's `traceparent` and its number. */
export interface StoredTrace {
  parent: string;
  attempt: number;
}

/** A span context as `traceparent` text (stored with a pause or a checkpoint, to link the next attempt). */
export function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`;
}

/** The span context a stored `traceparent` names, if it is one. */
export function linkFrom(traceparent: string | undefined) {
  const m = traceparent ? /^00-([0-9a-f]{32})-([0-9a-f]{16})-0([01])$/.exec(traceparent) : null;
  return m ? { traceId: m[1], spanId: m[2], traceFlags: Number(m[3]), isRemote: true } : undefined;
}

/** An OpenAI chat message in the GenAI conventions' message shape (role and parts). */
export function messageParts(m: ChatCompletionMessageParam): Record<string, unknown> {
  const parts: Record<string, unknown>[] = [];
  const content = (m as { content?: unknown }).content;
  if (typeof content === 'string') {
    parts.push(
      m.role === 'tool'
        ? { type: 'tool_call_response', id: m.tool_call_id, response: content }
        : { type: 'text', content },
    );
  } else if (Array.isArray(content)) {
    for (const p of content as { type?: string; text?: string }[])
      if (p.type === 'text') parts.push({ type: 'text', content: p.text });
  }
  for (const c of (m as { tool_calls?: ModelReply['tool_calls'] }).tool_calls ?? []) {
    parts.push({ type: 'tool_call', id: c.id, name: c.function.name, arguments: c.function.arguments });
  }
  return { role: m.role, parts };
}

/**
 * The conversation as JSON, redacted, within the attribute limit: the latest messages are kept (a long task's
 * beginning is in its earlier chat spans), with a note of how many earlier ones were left out.
 */
export function latestMessages(
  messages: readonly ChatCompletionMessageParam[],
  redacted: (value: unknown) => string,
): string {
  const parts = messages.map((m) => redacted(messageParts(m)));
  let size = 2;
  let from = parts.length;
  while (from > 0 && size + parts[from - 1].length + 1 <= ATTRIBUTE_VALUE_LIMIT - 200) {
    from--;
    size += parts[from].length + 1;
  }
  const note =
    from > 0
      ? [
          JSON.stringify({
            role: 'note',
            parts: [{ type: 'text', content: `${from} earlier messages left out` }],
          }),
        ]
      : [];
  return `[${[...note, ...parts.slice(from)].join(',')}]`;
}

/** A `toolset_change` event as the attributes of its manage_toolsets call's span. */
export function toolsetChangeAttributes(data: Record<string, unknown>) {
  const tokens = data.tool_definition_tokens as { change?: number; total?: number } | undefined;
  return {
    [TOOLSHIFT.outcome]: 'ok',
    [TOOLSHIFT.toolsetAction]: String(data.action),
    [TOOLSHIFT.toolsetsChanged]: (data.toolset_ids as string[]) ?? [],
    [TOOLSHIFT.toolsetsActive]: (data.active_toolsets as string[]) ?? [],
    'toolshift.tools.added': ((data.added_tools as string[]) ?? []).length,
    'toolshift.tools.removed': ((data.removed_tools as string[]) ?? []).length,
    ...(typeof tokens?.total === 'number' && typeof tokens.change === 'number'
      ? {
          [TOOLSHIFT.tokensBefore]: tokens.total - tokens.change,
          [TOOLSHIFT.tokensAfter]: tokens.total,
        }
      : {}),
  };
}

/** What a task's trace needs to know about it. */
export interface TaskTraceInfo {
  taskId: string;
  sessionId: string;
  model: string;
  exposure: ToolExposure;
  /** The model endpoint, for server.address / server.port. */
  baseURL?: string;
  /** The API spoken to the model (AGENT_PROVIDER): `anthropic` names Anthropic, the others OpenAI's. */
  provider?: string;
  requestId?: string | null;
}

/** gen_ai.provider.name of a provider setting (OpenTelemetry's well-known names). */
function providerName(provider: string | undefined): string {
  return provider === 'anthropic' ? 'anthropic' : 'openai';
}

/** The attributes of an attempt's `invoke_agent` span. */
export function attemptAttributes(info: TaskTraceInfo, agent: string, attempt: number) {
  return {
    [GENAI.operation]: 'invoke_agent',
    [GENAI.agentName]: agent,
    [GENAI.provider]: providerName(info.provider),
    [GENAI.requestModel]: info.model,
    [GENAI.conversation]: info.sessionId,
    [TOOLSHIFT.task]: info.taskId,
    [TOOLSHIFT.session]: info.sessionId,
    [TOOLSHIFT.exposure]: info.exposure,
    [TOOLSHIFT.attempt]: attempt,
    ...(info.requestId ? { [TOOLSHIFT.requestId]: info.requestId } : {}),
  };
}

/** The model endpoint as a `chat` span's server.address and server.port. */
export function serverOf(baseURL: string | undefined): Record<string, string | number> {
  const url = URL.parse(baseURL ?? 'https://api.openai.com/v1');
  return url
    ? {
        'server.address': url.hostname,
        'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
      }
    : {};
}

/** An `execute_tool` span's attributes: the tool's name and the call's id, both bounded by the caller. */
export function toolSpanAttributes(name: string, id: string): Record<string, string> {
  return {
    [GENAI.operation]: 'execute_tool',
    [GENAI.toolName]: name,
    [GENAI.toolCallId]: id,
    [GENAI.toolType]: 'function',
  };
}

/** The spans of a run_code script's calls in flight: children of the run_code call's span, by call id. */
export class ScriptSpans {
  private readonly open = new Map<string, Span>();
  private readonly tracing: ServiceTracing;

  constructor(tracing: ServiceTracing) {
    this.tracing = tracing;
  }

  start(parent: Span, name: string, id: string): Span {
    const span = this.tracing.tracer.startSpan(
      `execute_tool ${name}`,
      { kind: SpanKind.INTERNAL, attributes: toolSpanAttributes(name, id) },
      trace.setSpan(ROOT_CONTEXT, parent),
    );
    this.open.set(id, span);
    return span;
  }

  /** Call `id` ended: its span is told how (`describe`) and ends; false when no such call was in flight. */
  end(id: string, describe: (span: Span) => void): boolean {
    const span = this.open.get(id);
    if (!span) return false;
    this.open.delete(id);
    describe(span);
    span.end();
    return true;
  }

  /** The run ended with calls in flight (stopped): their spans end, saying so. */
  endAll(): void {
    for (const span of this.open.values()) {
      span.setAttribute(TOOLSHIFT.outcome, 'stopped');
      span.end();
    }
    this.open.clear();
  }
}

/** A `chat` span's attributes as its model call begins. */
export function chatAttributes(
  info: TaskTraceInfo,
  server: Record<string, string | number>,
  data: Record<string, unknown>,
): Record<string, string | number> {
  return {
    [GENAI.operation]: 'chat',
    [GENAI.provider]: providerName(info.provider),
    [GENAI.requestModel]: info.model,
    ...server,
    [TOOLSHIFT.step]: Number(data.step),
    [TOOLSHIFT.toolTokens]: Number(data.tool_tokens ?? 0),
    [TOOLSHIFT.allToolsetsTokens]: Number(data.all_toolsets_tool_tokens ?? 0),
    'toolshift.tools.count': Array.isArray(data.tools) ? data.tools.length : 0,
  };
}

/** A `chat` span's attributes as its reply comes: finish reason, tokens, attempts. */
export function chatEndAttributes(data: Record<string, unknown>) {
  const usage = data.usage as { prompt_tokens?: number; completion_tokens?: number } | undefined;
  return {
    [GENAI.finishReasons]: [String(data.finish_reason ?? 'stop')],
    [GENAI.inputTokens]: usage?.prompt_tokens ?? 0,
    [GENAI.outputTokens]: usage?.completion_tokens ?? 0,
    'toolshift.model.attempts': Number(data.attempts ?? 1),
  };
}

/** A model call's retry, as an event of its `chat` span (`reason` already bounded and redacted). */
export function retryAttributes(data: Record<string, unknown>, reason: string) {
  return {
    'toolshift.retry.attempt': Number(data.attempt),
    ...(typeof data.status === 'number' ? { 'http.response.status_code': data.status } : {}),
    'toolshift.retry.reason': reason,
    'toolshift.retry.delay_ms': Number(data.delay_ms ?? 0),
  };
}

/** What a model reply says of itself, on its `chat` span: the model and id that answered, the cache's tokens. */
export function replyAttributes(reply: ModelReply, safe: (value: unknown) => string) {
  return {
    ...(reply.model ? { [GENAI.responseModel]: safe(reply.model) } : {}),
    ...(reply.id ? { [GENAI.responseId]: safe(reply.id) } : {}),
    ...(typeof reply.cached_tokens === 'number' ? { [GENAI.cachedInputTokens]: reply.cached_tokens } : {}),
    ...(typeof reply.cache_write_tokens === 'number'
      ? { [GENAI.cacheWriteInputTokens]: reply.cache_write_tokens }
      : {}),
  };
}

/** An attempt's span as the task ends: its status and the task's tokens. */
export function attemptEndAttributes(status: string, usage: unknown) {
  const u = usage as { prompt_tokens?: number; completion_tokens?: number } | undefined;
  return {
    [TOOLSHIFT.status]: status,
    [GENAI.inputTokens]: u?.prompt_tokens ?? 0,
    [GENAI.outputTokens]: u?.completion_tokens ?? 0,
  };
}
