import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/client';
import type { ToolResult } from '../../tool-server/contract.ts';
import type { Redactor } from '../env-expand.ts';
import type { Backend } from './backend.ts';
import { type McpConnection, UpstreamError } from './mcp-connection.ts';

// A toolset backed by an upstream MCP server: calls go over the shared connection under the server's
// own tool names, and MCP results become ToolResults (the same shape native tools return).

/** One content block as the model sees it: text as text, binary content described instead of inlined. */
function describeBlock(block: ContentBlock): unknown {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
    case 'audio':
      return { type: block.type, mimeType: block.mimeType, bytes: Math.floor((block.data.length * 3) / 4) };
    case 'resource':
      return 'text' in block.resource
        ? { type: 'resource', uri: block.resource.uri, text: block.resource.text }
        : { type: 'resource', uri: block.resource.uri, mimeType: block.resource.mimeType };
    case 'resource_link':
      return { type: 'resource_link', uri: block.uri, name: block.name, description: block.description };
    default:
      return block;
  }
}

/** `structuredContent` when the server gives it, else the text content (one string when it is all text). */
export function toToolResult(result: CallToolResult, ms: number, redactor: Redactor): ToolResult {
  const blocks = result.content ?? [];
  const text = blocks
    .filter((b): b is Extract<ContentBlock, { type: 'text' }> => b.type === 'text')
    .map((b) => b.text)
    .join('\n');
  const execution_time_ms = Math.round(ms * 100) / 100;
  if (result.isError) {
    return {
      success: false,
      result: null,
      error: redactor.text(text || 'The tool reported an error without a message'),
      execution_time_ms,
    };
  }
  let value: unknown;
  if (result.structuredContent !== undefined) value = result.structuredContent;
  else if (blocks.every((b) => b.type === 'text')) value = text;
  else value = blocks.map(describeBlock);
  return { success: true, result: redactor.deep(value), execution_time_ms };
}

/** What a toolset on an upstream server needs to route its calls. */
export interface McpToolsetRoute {
  connection: McpConnection;
  redactor: Redactor;
  timeoutMs: number;
  /** The server's own name for a tool the gateway offers under `exposed` (prefix and all). */
  upstreamName(exposed: string): string | undefined;
}

/** The Backend of one MCP toolset; a failed or timed-out upstream call is an error result, never an exception. */
export function mcpToolsetBackend(route: McpToolsetRoute): Backend {
  const { connection, redactor } = route;
  return {
    name: `mcp:${connection.label}`,
    async listTools() {
      const tools = await connection.listTools();
      return tools.map((t) => ({
        name: t.name,
        description: t.description ?? '',
        parameters: t.inputSchema as Record<string, unknown>,
        annotations: { readOnlyHint: false, destructiveHint: true, ...t.annotations },
      }));
    },
    async callTool(name, args) {
      const started = performance.now();
      try {
        const result = await connection.callTool(route.upstreamName(name) ?? name, args, route.timeoutMs);
        return toToolResult(result, performance.now() - started, redactor);
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        return {
          success: false,
          result: null,
          error: redactor.text(err.message),
          execution_time_ms: Math.round((performance.now() - started) * 100) / 100,
        };
      }
    },
    async health() {
      const s = connection.status();
      return { ok: s.state !== 'down', detail: s.reason ?? s.state };
    },
  };
}
