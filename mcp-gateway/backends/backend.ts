import type { ToolDefinition, ToolResult } from '../../tool-server/contract.ts';

/** What a backend is told about one call. */
export interface BackendCall {
  signal?: AbortSignal;
  /** The gateway session making the call; calls without one share the key ''. */
  session?: string;
  /** The call's idempotency key, for a backend that keeps its own record of calls (or passes it on). */
  key?: string;
  /** Whose call it is (a digest of the caller's credential): a shared backend is shared fairly between callers first. */
  owner?: string;
  /** Whose work the call is (`user:<id>`): where a toolset takes people's own values, theirs are used. */
  forUser?: string;
}

/** Where a toolset's tools live. The tool-server is one; upstream MCP servers implement the same interface. */
export interface Backend {
  readonly name: string;
  listTools(): Promise<ToolDefinition[]>;
  /** `session`: whose call it is, so a shared backend shares its calls in flight fairly between sessions. */
  callTool(name: string, args: Record<string, unknown>, call?: BackendCall): Promise<ToolResult>;
  health(): Promise<{ ok: boolean; detail?: string }>;
}
