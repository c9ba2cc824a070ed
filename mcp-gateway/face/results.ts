import type { CallToolResult, Tool } from '@modelcontextprotocol/server';
import type { CallToolResponse, GatewayTool } from '../contract.ts';

// Shapes between the gateway's REST world (ToolResult, GatewayTool) and MCP's (CallToolResult, Tool).

/** A gateway tool as an MCP tool definition: the backend's schema and annotations unchanged. */
export function toMcpTool(
  tool: Pick<GatewayTool, 'name' | 'description' | 'parameters' | 'annotations'>,
): Tool {
  return {
    name: tool.name,
    description: tool.description,
    inputSchema: tool.parameters as Tool['inputSchema'],
    annotations: tool.annotations,
  };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A tool's outcome as an MCP result: text for every client, the structured value for those that read it. */
export function toCallToolResult(result: CallToolResponse): CallToolResult {
  // A toolset activated on the way is told as an ACTIVATE would tell it, after the tool's own content.
  const told: CallToolResult['content'] = result.activated
    ? [{ type: 'text', text: JSON.stringify({ activated_for_this_call: result.activated.result.message }) }]
    : [];
  if (!result.success) {
    return {
      content: [{ type: 'text', text: result.error ?? 'The tool failed without a message' }, ...told],
      isError: true,
    };
  }
  const text = typeof result.result === 'string' ? result.result : JSON.stringify(result.result);
  return {
    content: [{ type: 'text', text }, ...told],
    ...(isRecord(result.result) ? { structuredContent: result.result } : {}),
  };
}

/** A refusal (inactive tool, bad arguments, expired handle …) as a tool error the model can read and act on. */
export function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

/** A meta-tool's JSON answer, as text and as structured content. */
export function jsonResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
}
