import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { GatewayTool } from '../mcp-gateway/contract.ts';
import { manageToolsetsTool } from './manage-toolsets.ts';
import type { ModelRequest } from './model.ts';

/**
 * The one place a model request is built: the meta-tool first, then the session's active tools in the
 * gateway's stable order, so a step without a toolset change extends the previous request byte for byte.
 */
export function buildModelRequest(
  model: string,
  messages: ChatCompletionMessageParam[],
  tools: readonly GatewayTool[],
): ModelRequest {
  const functions: ChatCompletionTool[] = tools.map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
  return { model, messages: [...messages], tools: [manageToolsetsTool, ...functions] };
}
