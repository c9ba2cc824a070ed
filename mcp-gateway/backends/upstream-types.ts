import type { AuthProvider } from '@modelcontextprotocol/client';
import type { Logger } from '../../lib/telemetry/log.ts';
import type { Redactor } from './redactor.ts';
import type { UpstreamPool } from './upstream-pool.ts';

// What an upstream MCP server is (its spec, the protocol to speak), what its connection (mcp-connection.ts)
// needs from the gateway, and the state it is in: for the connection and for what reports on it.

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

/** What a connection needs from the gateway. */
export interface ConnectionDeps {
  log: Logger;
  redactor: Redactor;
  /** How long connecting and listing may take (default 30 s). */
  connectTimeoutMs?: number;
  /** Liveness check after a timed-out call (default: min(5 s, the call's timeout)). */
  livenessTimeoutMs?: number;
  /** The largest message the server may send (a stdio line, an HTTP body, one SSE event); default 16 MiB. */
  maxMessageBytes?: number;
  /** The gateway's stdio servers, bounded and stopped when idle (upstream-pool.ts); none: unbounded. */
  pool?: UpstreamPool;
  /** Calls in flight at once (UPSTREAM_MAX_CONCURRENT_CALLS); more wait, each session in a queue of its own. */
  maxConcurrentCalls?: number;
  /** Calls in flight at once for one session (UPSTREAM_MAX_CALLS_PER_SESSION); it may have four times as many waiting. */
  maxCallsPerSession?: number;
  /** An HTTP server reached with a person's OAuth grant (oauth-accounts.ts): their token on every request. */
  auth?: AuthProvider;
}

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

/**
 * The toolset reaches its server with each person's own account (their secret, their OAuth grant), and this
 * person has not connected theirs: `connectUrl` is where they do (the console's page for it).
 */
export class ConsentNeeded extends UpstreamError {
  readonly toolset: string;
  readonly connectUrl: string | undefined;
  constructor(message: string, toolset: string, connectUrl?: string) {
    super(message);
    this.toolset = toolset;
    this.connectUrl = connectUrl;
  }
}
