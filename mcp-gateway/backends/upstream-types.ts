// What an upstream MCP server is (its spec, the protocol to speak) and the state it is in: for the connection
// (mcp-connection.ts) and for what reports on it.

/** Which protocol handshake to use: the 2025 `initialize`, probe and pick, or the 2026-07-28 revision only. */
export type ProtocolChoice = 'legacy' | 'auto' | '2026-07-28';

/** An upstream server, with `${VAR}` references already filled in. */
export type McpServerSpec =
  | {
      transport: 'stdio';
      command: string;
      args: string[];
      env: Record<string, string>;
      cwd?: string;
      protocol: ProtocolChoice;
    }
  | { transport: 'http'; url: string; headers: Record<string, string>; protocol: ProtocolChoice };

/** `idle`: not connected yet (connections are made on first use); `down`: failed, restarted on next use. */
export type UpstreamState = 'idle' | 'connecting' | 'up' | 'down';

/** What the admin listing and /health show about an upstream. */
export interface UpstreamStatus {
  state: UpstreamState;
  reason?: string;
  pid?: number;
  protocol?: string;
  restarts: number;
}

/** An upstream failure the call at hand cannot recover from; its message is safe to show (secrets redacted). */
export class UpstreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
