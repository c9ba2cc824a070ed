import type { ChatCompletionMessageFunctionToolCall } from 'openai/resources/chat/completions';
import type { Model, ModelReply, ModelRequest } from '../../agent-server/clients/model.ts';

/** A scripted step: a fixed reply, or a function of the request (for replies that depend on what came back). */
export type Step = ModelReply | ((request: ModelRequest) => ModelReply | Promise<ModelReply>);

let nextId = 0;

/** A tool call as the model would send it; `args` may be a raw string to test malformed JSON. */
export function call(
  name: string,
  args: unknown,
  id = `call_${++nextId}`,
): ChatCompletionMessageFunctionToolCall {
  return {
    id,
    type: 'function',
    function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
  };
}

/** A reply with tool calls. */
export function calls(...toolCalls: ChatCompletionMessageFunctionToolCall[]): ModelReply {
  return {
    content: null,
    tool_calls: toolCalls,
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

/** A final answer. */
export function answer(text: string): ModelReply {
  return {
    content: text,
    tool_calls: [],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

/** A Model that plays a script and records every request it was sent (deep copies). */
export class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  private readonly steps: Step[];

  constructor(steps: Step[]) {
    this.steps = steps;
  }

  async complete(request: ModelRequest): Promise<ModelReply> {
    this.requests.push(structuredClone(request));
    const step = this.steps[this.requests.length - 1];
    if (!step) throw new Error(`ScriptedModel: no step ${this.requests.length} in the script`);
    return typeof step === 'function' ? step(request) : step;
  }

  /** Tool names offered in each request, in order. */
  toolNames(): string[][] {
    return this.requests.map((r) => r.tools.map((t) => (t.type === 'function' ? t.function.name : t.type)));
  }

  /** The tool messages the model was sent in request `i`, by tool_call_id. */
  toolMessages(i: number): Record<string, string> {
    const out: Record<string, string> = {};
    for (const m of this.requests[i].messages) {
      if (m.role === 'tool') out[m.tool_call_id] = String(m.content);
    }
    return out;
  }
}
