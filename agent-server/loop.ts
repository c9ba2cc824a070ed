import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { TaskEvent, Usage } from './contract.ts';
import { ModelError } from './errors.ts';
import type { GatewayClient } from './gateway-client.ts';
import type { Model } from './model.ts';
import { buildSystemPrompt } from './prompt.ts';
import { buildModelRequest } from './request.ts';
import { executeToolCall } from './tool-execution.ts';

/** Records a step; the one call through which every event of a task leaves the loop. */
export type Emit = (type: TaskEvent['type'], data: Record<string, unknown>, durationMs?: number) => void;

/** What the loop needs. */
export interface LoopDeps {
  model: Model;
  modelName: string;
  gateway: GatewayClient;
  emit: Emit;
}

/** How a task's loop ended. */
export interface LoopOutcome {
  status: 'completed' | 'failed' | 'max_steps';
  final_answer: string | null;
  error: string | null;
  steps: number;
  usage: Usage;
  toolsets_used: string[];
}

const since = (start: number) => Math.round((performance.now() - start) * 100) / 100;

/** What the model is told when its reply was cut off: none of the reply's tool calls ran. */
export const CUT_OFF_NOTE =
  'Your previous reply was cut off at the output token limit (finish_reason: length), so none of its tool ' +
  'calls were run. Send them again, shorter: for example write a large file in several smaller edits.';

/** The tool-calling loop: model ⇄ tools until the model answers without tool calls or max_steps runs out. */
export async function runLoop(
  input: { sessionId: string; goal: string; maxSteps: number },
  deps: LoopDeps,
): Promise<LoopOutcome> {
  const { sessionId, maxSteps } = input;
  const usage: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  const used = new Set<string>();
  let steps = 0;
  let cutOffs = 0;
  const end = (
    status: LoopOutcome['status'],
    final_answer: string | null,
    error: string | null,
  ): LoopOutcome => ({
    status,
    final_answer,
    error,
    steps,
    usage,
    toolsets_used: [...used],
  });

  try {
    const { toolsets } = await deps.gateway.listToolsets(sessionId);
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: buildSystemPrompt(toolsets) },
      { role: 'user', content: input.goal },
    ];
    while (steps < maxSteps) {
      const tools = await deps.gateway.tools(sessionId);
      const request = buildModelRequest(deps.modelName, messages, tools);
      const started = performance.now();
      const reply = await deps.model.complete(request);
      steps++;
      usage.prompt_tokens += reply.usage.prompt_tokens;
      usage.completion_tokens += reply.usage.completion_tokens;
      usage.total_tokens += reply.usage.total_tokens;
      deps.emit(
        'model_call',
        {
          step: steps,
          tools: request.tools.map((t) => (t.type === 'function' ? t.function.name : t.type)),
          content: reply.content,
          tool_calls: reply.tool_calls.map((c) => ({ id: c.id, name: c.function.name })),
          usage: reply.usage,
          finish_reason: reply.finish_reason ?? null,
        },
        since(started),
      );
      if (reply.finish_reason === 'length') {
        // A cut-off reply's tool calls may be truncated mid-argument: never run them.
        if (reply.tool_calls.length > 0 || reply.content === null) {
          if (++cutOffs >= 2) {
            return end(
              'failed',
              null,
              'The model’s replies were cut off at its output token limit twice in a row (finish_reason: length); ' +
                'their tool calls were not run. Raise the model’s output limit or split the task.',
            );
          }
          messages.push({ role: 'user', content: CUT_OFF_NOTE });
          continue;
        }
      }
      cutOffs = 0;
      if (reply.tool_calls.length === 0) return end('completed', reply.content ?? '', null);

      messages.push({ role: 'assistant', content: reply.content, tool_calls: reply.tool_calls });
      const toolsetOf = new Map(tools.map((t) => [t.name, t.toolset]));
      for (const call of reply.tool_calls) {
        const callStarted = performance.now();
        const outcome = await executeToolCall(call, sessionId, deps.gateway);
        messages.push({ role: 'tool', tool_call_id: call.id, content: outcome.content });
        const toolset = toolsetOf.get(call.function.name);
        if (outcome.ok && toolset) used.add(toolset);
        if (outcome.change) {
          if (outcome.change.action === 'ACTIVATE') for (const id of outcome.change.toolset_ids) used.add(id);
          deps.emit('toolset_change', { step: steps, ...outcome.change }, since(callStarted));
        } else {
          deps.emit(
            'tool_call',
            {
              step: steps,
              tool_call_id: call.id,
              name: call.function.name,
              arguments: outcome.arguments,
              ok: outcome.ok,
              output: outcome.content.length > 2000 ? `${outcome.content.slice(0, 2000)}…` : outcome.content,
            },
            since(callStarted),
          );
        }
      }
    }
    return end('max_steps', null, `The task reached max_steps (${maxSteps}) without a final answer`);
  } catch (err) {
    const message = err instanceof ModelError ? err.message : `Task failed: ${(err as Error).message}`;
    return end('failed', null, message);
  }
}
