import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { GatewayTool } from '../../mcp-gateway/contract.ts';
import type { ModelRequest } from '../clients/model.ts';
import type { ToolExposure } from '../contract.ts';
import { runCodeTool } from './code-mode.ts';
import { callToolTool } from './dispatch.ts';
import { manageToolsetsTool } from './manage-toolsets.ts';

/**
 * A gateway tool as an OpenAI function tool, made once per definition object: the loop reuses the session's
 * tool list between changes, so each step gets the same objects (and counting their tokens stays a lookup).
 */
const asFunction = new WeakMap<GatewayTool, ChatCompletionTool>();

function functionTool(t: GatewayTool): ChatCompletionTool {
  let tool = asFunction.get(t);
  if (!tool) {
    tool = {
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    };
    asFunction.set(t, tool);
  }
  return tool;
}

/** The fixed tools array of a dispatch task: the same two tools, whatever is active. */
const DISPATCH_TOOLS: readonly ChatCompletionTool[] = [manageToolsetsTool, callToolTool];

/** The fixed tools array of a code task. */
const CODE_TOOLS: readonly ChatCompletionTool[] = [manageToolsetsTool, runCodeTool];

/**
 * The one place a model request is built. `native`: the meta-tool first, then the session's active tools in
 * the gateway's stable order, so a step without a toolset change extends the previous request byte for byte.
 * `dispatch`: always `[manage_toolsets, call_tool]`, so every step extends the previous one, toggles included;
 * `code`: always `[manage_toolsets, run_code]`, the same way.
 */
export function buildModelRequest(
  model: string,
  messages: ChatCompletionMessageParam[],
  tools: readonly GatewayTool[],
  exposure: ToolExposure = 'native',
  extra: readonly ChatCompletionTool[] = [],
): ModelRequest {
  const offered =
    exposure === 'dispatch'
      ? DISPATCH_TOOLS
      : exposure === 'code'
        ? CODE_TOOLS
        : [manageToolsetsTool, ...tools.map(functionTool)];
  // The loop's own tools (read_stored_result once a result was moved out) come last: the prefix stays.
  return { model, messages: [...messages], tools: [...offered, ...extra] };
}
