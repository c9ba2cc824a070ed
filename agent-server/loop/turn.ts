import type { GatewayTool, ToolsetInfo } from '../../mcp-gateway/contract.ts';
import type { ModelReply, ModelRequest } from '../clients/model.ts';
import { withdrawInactive } from './code-view.ts';
import { compactIfNeeded } from './compact.ts';
import { contextView, hasMovedOut, readStoredResultTool } from './context.ts';
import { deltaSender } from './deltas.ts';
import { buildModelRequest } from './request.ts';
import { addUsage, endWith, type LoopOutcome, type LoopRun, type LoopState } from './state.ts';
import { throwIfStopped } from './tool-step.ts';

// One turn of the loop: preparing the request (the session's tools, the conversation, what they weigh),
// asking the model and counting its reply, and resolving what the reply asks for: its tool calls run
// (answer.ts), the task ends, or the model is asked again.

const since = (start: number) => Math.round((performance.now() - start) * 100) / 100;

/** What the model is told when its reply was cut off: none of the reply's tool calls ran. */
export const CUT_OFF_NOTE =
  'Your previous reply was cut off at the output token limit (finish_reason: length), so none of its tool ' +
  'calls were run. Send them again, shorter: for example write a large file in several smaller edits.';

/**
 * The tool-definition tokens of a request carrying every enabled toolset, as far as they are known: an upstream
 * server not started yet has not listed its tools, so its toolset is named in `unknown` instead of guessed.
 */
export function allToolsetsTokens(
  toolsets: readonly ToolsetInfo[],
  meta: number,
): { known: number; unknown: string[] } {
  let known = meta;
  const unknown: string[] = [];
  for (const t of toolsets) {
    if (!t.enabled) continue;
    if (typeof t.definition_tokens === 'number') known += t.definition_tokens;
    else unknown.push(t.id);
  }
  return { known, unknown };
}

/** What each request is weighed against: one carrying every enabled toolset (the meta-tool's tokens included). */
export interface AllToolsets {
  readonly meta: number;
  known: number;
  unknown: string[];
}

/** A turn's request before the model answers it, and what it weighs. */
export interface Turn {
  step: number;
  tools: GatewayTool[];
  request: ModelRequest;
  toolTokens: number;
  messageTokens: number;
}

/** Prepares the next turn: the request from the session's tools and the conversation, told as `model_request`. */
export async function prepareTurn(run: LoopRun, all: AllToolsets): Promise<Turn> {
  const { sessionId, deps, gateway, state } = run;
  const { signal } = deps;
  throwIfStopped(signal);
  const tools = await gateway.tools(sessionId, signal);
  const step = state.steps + 1;
  let request = requestOf(run, tools);
  const toolTokens = deps.tokens.tools(
    request.tools.flatMap((t) => (t.type === 'function' ? [t.function] : [])),
  );
  // Near the model's context budget the conversation is compacted first (compact.ts).
  const compacted = await compactIfNeeded(run, toolTokens);
  if (compacted) {
    deps.emit('context_compacted', { step, ...compacted });
    request = requestOf(run, tools);
  }
  const messageTokens = deps.tokens.messages(request.messages);
  // A server started since the last listing (the model activated it) has listed its tools by now.
  if (all.unknown.length > 0) {
    const { toolsets } = await gateway.listToolsets(sessionId, undefined, signal);
    Object.assign(all, allToolsetsTokens(toolsets, all.meta));
  }
  deps.emit('model_request', {
    step,
    tools: toolNames(request),
    tool_tokens: toolTokens,
    message_tokens: messageTokens,
    messages: request.messages.length,
    all_toolsets_tool_tokens: all.known,
    all_toolsets_not_counted: all.unknown,
    tokenizer: deps.tokens.name,
    exposure: state.exposure.mode,
  });
  return { step, tools, request, toolTokens, messageTokens };
}

/** Asks the model for the turn's reply and counts it (the step, tokens, usage), told as `model_call`. */
export async function askModel(run: LoopRun, turn: Turn, all: AllToolsets): Promise<ModelReply> {
  const { deps, state } = run;
  const { signal, emit } = deps;
  const { step, request } = turn;
  deps.trace?.request(request);
  const started = performance.now();
  const deltas = deps.live && deltaSender(deps.live, step);
  // The owner's day of model tokens spent: the task ends saying whose limit and when it resets.
  await deps.quota?.beforeModel();
  let reply: ModelReply;
  try {
    reply = await deps.model.complete(request, {
      signal,
      onRetry: (retry) => {
        deltas?.retried();
        emit('model_retry', { step, ...retry });
      },
      ...(deltas ? { onDelta: deltas.onDelta } : {}),
    });
    deltas?.flush();
  } finally {
    deltas?.close();
  }
  deps.trace?.reply(reply);
  // Counted as used, whatever the database says: a count it could not take is not the task's failure.
  await deps.quota?.afterModel(reply.usage.total_tokens).catch(() => undefined);
  state.steps = step;
  count(state, turn, reply, all);
  const latency = since(started);
  emit(
    'model_call',
    {
      step,
      tools: toolNames(request),
      content: reply.content,
      tool_calls: reply.tool_calls.map((c) => ({ id: c.id, name: c.function.name })),
      usage: {
        ...reply.usage,
        ...(reply.cached_tokens !== undefined ? { cached_tokens: reply.cached_tokens } : {}),
        ...(reply.cache_write_tokens !== undefined ? { cache_write_tokens: reply.cache_write_tokens } : {}),
      },
      ...(reply.usage_missing ? { usage_missing: true } : {}),
      finish_reason: reply.finish_reason ?? null,
      latency_ms: latency,
      attempts: reply.attempts ?? 1,
      tool_tokens: turn.toolTokens,
      message_tokens: turn.messageTokens,
    },
    latency,
  );
  throwIfStopped(signal);
  return reply;
}

/** Counted once the model answered: a request that failed cost nothing and saved nothing. */
function count(state: LoopState, turn: Turn, reply: ModelReply, all: AllToolsets): void {
  const { tokens, usage } = state;
  tokens.requests++;
  tokens.tool_definition_tokens += turn.toolTokens;
  tokens.message_tokens += turn.messageTokens;
  tokens.all_toolsets_tool_tokens += all.known;
  const notCounted = new Set([...(tokens.all_toolsets_not_counted ?? []), ...all.unknown]);
  tokens.all_toolsets_not_counted = [...notCounted];
  addUsage(usage, reply);
}

/** What a reply asks for: the model asked again (it was cut off), the task's end, or its tool calls run. */
export type Resolution =
  | { next: 'ask_again' }
  | { next: 'end'; outcome: LoopOutcome }
  | { next: 'run_calls' };

/** Resolves the model's reply; a reply with tool calls joins the conversation before they run. */
export function resolveReply(state: LoopState, reply: ModelReply): Resolution {
  if (reply.finish_reason === 'length') {
    // A cut-off reply's tool calls may be truncated mid-argument: never run them.
    if (reply.tool_calls.length > 0 || reply.content === null) {
      if (++state.cutOffs >= 2) {
        const why =
          'The model’s replies were cut off at its output token limit twice in a row (finish_reason: length); ' +
          'their tool calls were not run. Raise the model’s output limit or split the task.';
        return { next: 'end', outcome: endWith(state, 'failed', null, why) };
      }
      state.messages.push({ role: 'user', content: CUT_OFF_NOTE });
      return { next: 'ask_again' };
    }
  }
  state.cutOffs = 0;
  if (reply.tool_calls.length === 0) {
    return { next: 'end', outcome: endWith(state, 'completed', reply.content ?? '', null) };
  }
  state.messages.push({ role: 'assistant', content: reply.content, tool_calls: reply.tool_calls });
  return { next: 'run_calls' };
}

/** The request of the conversation as the model sees it (context.ts), with the read tool once it shows a stub. */
function requestOf(run: LoopRun, tools: GatewayTool[]): ModelRequest {
  const { deps, state } = run;
  const inContext = contextView(state.messages, state.context, state.stubs);
  // A code task does not carry the declarations of toolsets no longer active (code-view.ts).
  const view =
    state.exposure.mode === 'code'
      ? withdrawInactive(inContext, new Set(tools.map((t) => t.toolset)))
      : inContext;
  const extra = hasMovedOut(state.context) ? [readStoredResultTool] : [];
  const request = buildModelRequest(deps.modelName, view, tools, state.exposure.mode, extra);
  return deps.cacheKey ? { ...request, cacheKey: deps.cacheKey } : request;
}

function toolNames(request: ModelRequest): string[] {
  return request.tools.map((t) => (t.type === 'function' ? t.function.name : t.type));
}
