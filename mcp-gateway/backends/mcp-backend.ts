import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/client';
import type { ToolResult } from '../../tool-server/contract.ts';
import type { Backend } from './backend.ts';
import { ConsentNeeded, type McpConnection, UpstreamError } from './mcp-connection.ts';
import type { Redactor } from './redactor.ts';

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

/** The default cap of what an upstream result may put in front of the model, as native tools' reads are capped. */
export const DEFAULT_MAX_RESULT_BYTES = 256 * 1024;

/** The first `limit` bytes of `text` (never half a character) and a line saying what was cut. */
function cut(text: string, limit: number): string {
  const bytes = Buffer.byteLength(text);
  if (bytes <= limit) return text;
  let kept = Buffer.from(text).subarray(0, limit).toString('utf8');
  if (kept.endsWith('\uFFFD')) kept = kept.slice(0, -1);
  return (
    `${kept}\n[truncated: the server's result was ${bytes.toLocaleString('en-US')} bytes; the first ` +
    `${Buffer.byteLength(kept).toLocaleString('en-US')} are shown (UPSTREAM_MAX_RESULT_BYTES)]`
  );
}

/** A result value within `limit` bytes: text is cut with a marker; structured data too big becomes cut JSON text. */
function capped(value: unknown, limit: number): unknown {
  if (typeof value === 'string') return cut(value, limit);
  const json = JSON.stringify(value) ?? '';
  return Buffer.byteLength(json) <= limit ? value : cut(json, limit);
}

/** `structuredContent` when the server gives it, else the text content (one string when it is all text). */
export function toToolResult(
  result: CallToolResult,
  ms: number,
  redactor: Redactor,
  maxBytes = DEFAULT_MAX_RESULT_BYTES,
): ToolResult {
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
      error: redactor.text(cut(text || 'The tool reported an error without a message', maxBytes)),
      execution_time_ms,
    };
  }
  let value: unknown;
  if (result.structuredContent !== undefined) value = result.structuredContent;
  else if (blocks.every((b) => b.type === 'text')) value = text;
  else value = blocks.map(describeBlock);
  return { success: true, result: redactor.deep(capped(value, maxBytes)), execution_time_ms };
}

/** What a toolset on an upstream server needs to route its calls. */
export interface McpToolsetRoute {
  /** The shared connection (its health is the toolset's). */
  connection: McpConnection;
  redactor: Redactor;
  /**
   * Where a person's call goes when they may bring their own values (catalog/personal.ts): their connection and
   * what its results are redacted of; UpstreamError when they must set one first.
   */
  personal?: (
    forUser: string | undefined,
    tool?: string,
  ) => Promise<{ connection: McpConnection; redactor: Redactor }>;
  timeoutMs: number;
  /** The most bytes of a result the model is given (UPSTREAM_MAX_RESULT_BYTES). */
  maxResultBytes?: number;
  /** The server's own name for a tool the gateway offers under `exposed` (prefix and all). */
  upstreamName(exposed: string): string | undefined;
}

/** The Backend of one MCP toolset; a failed or timed-out upstream call is an error result, never an exception. */
export function mcpToolsetBackend(route: McpToolsetRoute): Backend {
  const { connection } = route;
  return {
    name: `mcp:${connection.label}`,
    async listTools() {
      const tools = await connection.listTools();
      return tools.map((t) => ({
        name: t.name,
        description: t.description ?? '',
        parameters: t.inputSchema as Record<string, unknown>,
        ...(t.outputSchema ? { outputSchema: t.outputSchema as Record<string, unknown> } : {}),
        annotations: { readOnlyHint: false, destructiveHint: true, ...t.annotations },
      }));
    },
    async callTool(name, args, call) {
      const started = performance.now();
      let redactor = route.redactor;
      try {
        const upstream = route.upstreamName(name) ?? name;
        const own = route.personal ? await route.personal(call?.forUser, upstream) : { connection, redactor };
        redactor = own.redactor;
        const result = await own.connection.callTool(
          upstream,
          args,
          route.timeoutMs,
          call?.session,
          call?.key,
          call?.owner,
        );
        return toToolResult(result, performance.now() - started, redactor, route.maxResultBytes);
      } catch (err) {
        // A person who must connect their account first: a refusal of the gateway's (core/keyed-calls.ts).
        if (!(err instanceof UpstreamError) || err instanceof ConsentNeeded) throw err;
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
