import type { ToolDefinition, ToolResult } from '../../tool-server/contract.ts';

/** Where a toolset's tools live. The tool-server is one; upstream MCP servers implement the same interface. */
export interface Backend {
  readonly name: string;
  listTools(): Promise<ToolDefinition[]>;
  /** `key`: the call's idempotency key, for a backend that keeps its own record of calls (or passes it on). */
  callTool(
    name: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
    key?: string,
  ): Promise<ToolResult>;
  health(): Promise<{ ok: boolean; detail?: string }>;
}
