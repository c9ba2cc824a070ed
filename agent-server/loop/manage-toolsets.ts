import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import type { z } from 'zod';
import {
  MANAGE_TOOLSETS,
  type ManageToolsetsResponse,
  manageToolsetsDefinition,
} from '../../mcp-gateway/contract.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import { ToolDefinitionTokens } from '../contract.ts';

/** The meta-tool's name; the loop intercepts calls to it instead of routing them to the gateway's call route. */
export { MANAGE_TOOLSETS };

/** The gateway's meta-tool definition as an OpenAI function tool (the same tool the MCP face serves). */
export const manageToolsetsTool: ChatCompletionTool = {
  type: 'function',
  function: {
    name: manageToolsetsDefinition.name,
    description: manageToolsetsDefinition.description,
    parameters: manageToolsetsDefinition.parameters as unknown as Record<string, unknown>,
  },
};

/** What a manage_toolsets call did: the text for the model and, for a change, what changed. */
export interface ManageToolsetsOutcome {
  content: string;
  /** The gateway's result, of which `content` is the JSON text. */
  result: Record<string, unknown>;
  change?: ManageToolsetsResponse['change'];
  /** After a change, the session's tools as the gateway answered them (absent from an older gateway). */
  tools?: ManageToolsetsResponse['tools'];
  /** The gateway's count of the change in tool-definition tokens, when it reports one. */
  toolTokens?: z.infer<typeof ToolDefinitionTokens>;
}

/**
 * Forwards the model's arguments untouched to the gateway, which judges them (strictly, and on the
 * record) and acts on this task's session only.
 */
export async function runManageToolsets(
  args: Record<string, unknown>,
  sessionId: string,
  gateway: GatewayClient,
  signal?: AbortSignal,
): Promise<ManageToolsetsOutcome> {
  const res = await gateway.manageToolsets(sessionId, args, signal);
  const tokens = ToolDefinitionTokens.safeParse(res.result.tool_definition_tokens);
  return {
    content: JSON.stringify(res.result),
    result: res.result,
    change: res.change,
    ...(res.tools ? { tools: res.tools } : {}),
    ...(tokens.success ? { toolTokens: tokens.data } : {}),
  };
}
