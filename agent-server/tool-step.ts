import type {
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { GatewayTool } from '../mcp-gateway/contract.ts';
import type { EventType } from './contract.ts';
import { TaskStoppedError } from './errors.ts';
import type { GatewayClient } from './gateway-client.ts';
import { executeToolCall } from './tool-execution.ts';

/** Records a step; the one call through which every event of a task leaves the loop. */
export type Emit = (type: EventType, data: Record<string, unknown>, durationMs?: number) => void;

/** How much of a tool's output an event keeps (the model gets all of it). */
const EVENT_OUTPUT_CHARS = 2000;

const since = (start: number) => Math.round((performance.now() - start) * 100) / 100;

/** Throws the task's stop reason once it has been cancelled or has run out of time. */
export function throwIfStopped(signal: AbortSignal | undefined): void {
  if (!signal?.aborted) return;
  throw signal.reason instanceof TaskStoppedError ? signal.reason : new TaskStoppedError('cancelled');
}

/** What one reply's tool calls need: the session, the gateway, where events go, and the stop signal. */
export interface ToolStepContext {
  sessionId: string;
  step: number;
  gateway: GatewayClient;
  emit: Emit;
  signal?: AbortSignal;
  /** The tools offered in the request this reply answers (to know which toolset a call used). */
  tools: readonly GatewayTool[];
  /** Toolsets the task has used so far; calls add to it. */
  used: Set<string>;
}

/**
 * Runs a reply's tool calls in order, each announced (`tool_call_started`) and recorded (`tool_call`, or
 * `toolset_change` for a change of toolsets), and returns the tool messages. A stopped task runs no further
 * call: the signal is checked before each, and a call in flight is abandoned.
 */
export async function runToolCalls(
  calls: readonly ChatCompletionMessageFunctionToolCall[],
  ctx: ToolStepContext,
): Promise<ChatCompletionMessageParam[]> {
  const messages: ChatCompletionMessageParam[] = [];
  const toolsetOf = new Map(ctx.tools.map((t) => [t.name, t.toolset]));
  for (const call of calls) {
    throwIfStopped(ctx.signal);
    const started = performance.now();
    ctx.emit('tool_call_started', { step: ctx.step, tool_call_id: call.id, name: call.function.name });
    const outcome = await executeToolCall(call, ctx.sessionId, ctx.gateway, ctx.signal);
    throwIfStopped(ctx.signal);
    messages.push({ role: 'tool', tool_call_id: call.id, content: outcome.content });
    const toolset = toolsetOf.get(call.function.name);
    if (outcome.ok && toolset) ctx.used.add(toolset);
    const resultBytes = Buffer.byteLength(outcome.content);
    if (outcome.change) {
      if (outcome.change.action === 'ACTIVATE') for (const id of outcome.change.toolset_ids) ctx.used.add(id);
      ctx.emit(
        'toolset_change',
        {
          step: ctx.step,
          tool_call_id: call.id,
          ...outcome.change,
          ...(outcome.toolTokens ? { tool_definition_tokens: outcome.toolTokens } : {}),
        },
        since(started),
      );
    } else {
      ctx.emit(
        'tool_call',
        {
          step: ctx.step,
          tool_call_id: call.id,
          name: call.function.name,
          toolset: toolset ?? null,
          arguments: outcome.arguments,
          ok: outcome.ok,
          result_bytes: resultBytes,
          output:
            outcome.content.length > EVENT_OUTPUT_CHARS
              ? `${outcome.content.slice(0, EVENT_OUTPUT_CHARS)}…`
              : outcome.content,
        },
        since(started),
      );
    }
  }
  return messages;
}
