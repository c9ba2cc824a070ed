import {
  type CallToolResult,
  type Client,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
  type Tool,
} from '@modelcontextprotocol/client';
import { traceMeta } from '../../lib/telemetry/tracing.ts';
import { IDEMPOTENCY_META } from '../../tool-server/contract.ts';
import { FairSlots } from './fair-slots.ts';
import { StdioTransport } from './stdio-transport.ts';
import {
  answers,
  type ClientOwner,
  networkFailure,
  newClient,
  type Passthrough,
  relay,
  type UpstreamTransport,
} from './upstream-client.ts';
import type { PooledServer } from './upstream-pool.ts';
import {
  type ConnectionDeps,
  ConsentNeeded,
  type McpServerSpec,
  type ProtocolChoice,
  UpstreamError,
  type UpstreamState,
  type UpstreamStatus,
} from './upstream-types.ts';

export type { ConnectionDeps, McpServerSpec, ProtocolChoice, UpstreamState, UpstreamStatus };
export { ConsentNeeded, UpstreamError };

// One connection to one upstream MCP server, shared by every toolset that names the same server. It
// connects on first use, lists the tools (all pages), follows `notifications/tools/list_changed`, and
// turns a crashed or hung server into an error for the call at hand plus a restart, with backoff, on
// the next use. The client of each attempt, with the callbacks the server can trigger: upstream-client.ts.

const MAX_BACKOFF_MS = 30_000;
const DEFAULT_MAX_CONCURRENT_CALLS = 16;
const DEFAULT_MAX_CALLS_PER_SESSION = 8;
const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** 0 for the first failure (restart on the very next use), then 1 s, 2 s, 4 s … up to 30 s. */
export function backoffMs(failures: number): number {
  return failures <= 1 ? 0 : Math.min(MAX_BACKOFF_MS, 1000 * 2 ** (failures - 2));
}

/** A lazily connected, self-restarting client of one upstream MCP server. */
export class McpConnection implements PooledServer {
  private client?: Client;
  private transport?: UpstreamTransport;
  private connecting?: Promise<void>;
  private tools: Tool[] = [];
  private failures = 0;
  private restarts = 0;
  private nextAttemptAt = 0;
  private state: UpstreamState = 'idle';
  private reason?: string;
  private closed = false;
  private readonly listeners = new Set<(tools: Tool[]) => void>();
  /** Why a server that was up is idle now (stopped unused); shown until it starts again. */
  private idleReason?: string;
  lastUsed = Date.now();
  /** Tool calls in flight and waiting, per session (capped); other requests (listings, prompts, resources) in flight. */
  private readonly slots: FairSlots;
  private uses = 0;

  /** How the server is named in messages: the file's command or URL, with `${VAR}` unexpanded. */
  readonly label: string;
  private readonly spec: McpServerSpec;
  private readonly deps: ConnectionDeps;
  /** What this connection's clients report to (upstream-client.ts). */
  private readonly owner: ClientOwner;

  constructor(label: string, spec: McpServerSpec, deps: ConnectionDeps) {
    this.label = label;
    this.spec = spec;
    this.deps = deps;
    this.owner = {
      label,
      owns: (client) => this.client === client,
      toolsChanged: (tools) => this.toolsChanged(tools),
      lost: (client, reason) => this.drop(client, reason ?? this.exitReason(), false),
    };
    this.slots = new FairSlots({
      label,
      slots: deps.maxConcurrentCalls ?? DEFAULT_MAX_CONCURRENT_CALLS,
      perSession: deps.maxCallsPerSession ?? DEFAULT_MAX_CALLS_PER_SESSION,
    });
  }

  status(): UpstreamStatus {
    const pid = this.transport instanceof StdioTransport ? this.transport.pid : undefined;
    const reason = this.reason ?? (this.state === 'idle' ? this.idleReason : undefined);
    return {
      state: this.state,
      ...(reason ? { reason } : {}),
      ...(pid && this.state === 'up' ? { pid } : {}),
      ...(this.client?.getNegotiatedProtocolVersion()
        ? { protocol: this.client.getNegotiatedProtocolVersion() }
        : {}),
      restarts: this.restarts,
    };
  }

  /** What the server said about itself at connect time (for `toolsets import`). */
  identity(): { name?: string; title?: string; instructions?: string } {
    const info = this.client?.getServerVersion();
    return { name: info?.name, title: info?.title, instructions: this.client?.getInstructions() };
  }

  /** Called with the new tool list whenever the server announces a change. */
  onToolsChanged(listener: (tools: Tool[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The server's tools, connecting (or restarting) first if needed. */
  async listTools(): Promise<Tool[]> {
    return this.using(async () => {
      await this.ensureUp();
      return this.tools;
    });
  }

  /** Requests in flight of any kind: a server with one is not stopped for idleness or for room. */
  get inFlight(): number {
    return this.slots.running + this.uses;
  }

  /** Tool calls waiting for a place among those in flight (fair-slots.ts), every session together. */
  get waiting(): number {
    return this.slots.waiting;
  }

  /** Runs a request other than a tool call, counted as in use. */
  private async using<T>(work: () => Promise<T>): Promise<T> {
    this.uses++;
    this.lastUsed = Date.now();
    try {
      return await work();
    } finally {
      this.uses--;
      this.lastUsed = Date.now();
    }
  }

  /** The last tool list seen, without connecting. */
  knownTools(): Tool[] {
    return this.tools;
  }

  /** Connects unless connected; a server that failed recently waits out its backoff. */
  ensureUp(): Promise<void> {
    if (this.closed) return Promise.reject(new UpstreamError(`${this.label}: the connection is closed`));
    if (this.state === 'up' && this.client) return Promise.resolve();
    if (this.connecting) return this.connecting;
    const wait = this.nextAttemptAt - Date.now();
    if (this.state === 'down' && wait > 0) {
      return Promise.reject(
        new UpstreamError(
          `${this.label} is down (${this.reason}); the next restart attempt is in ${Math.ceil(wait / 1000)} s`,
        ),
      );
    }
    this.connecting = this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** Calls a tool; a timeout sends `notifications/cancelled` upstream and checks the server still answers. */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    timeoutMs: number,
    session = '',
    key?: string,
    owner = '',
  ): Promise<CallToolResult> {
    const started = Date.now();
    this.lastUsed = started;
    // A place among the calls in flight, shared fairly between sessions (fair-slots.ts), within the call's time.
    const release = await this.slots.acquire(session, name, timeoutMs, owner);
    try {
      // The time left after waiting for a place; a timeout is reported as the toolset's own.
      return await this.call(name, args, Math.max(1, timeoutMs - (Date.now() - started)), timeoutMs, key);
    } finally {
      this.lastUsed = Date.now();
      release();
    }
  }

  /** Stops an idle server's process when no call is in flight (the pool's idle shutdown, or room for another). */
  async stopUnused(reason: string): Promise<boolean> {
    if (this.inFlight > 0 || this.connecting) return false;
    const client = this.client;
    if (this.state !== 'up' || !client) return true;
    this.client = undefined;
    this.state = 'idle';
    this.idleReason = reason;
    await this.shutdown(client, this.transport);
    return true;
  }

  private async call(
    name: string,
    args: Record<string, unknown>,
    timeoutMs: number,
    statedMs = timeoutMs,
    key?: string,
  ): Promise<CallToolResult> {
    await this.ensureUp();
    const client = this.client as Client;
    try {
      // The caller's trace goes along in `_meta` (the MCP conventions), so a server that traces joins it; so
      // does the call's idempotency key, for a server that keeps a record of calls.
      const trace = traceMeta();
      const meta = key ? { ...trace, [IDEMPOTENCY_META]: key } : trace;
      const result = await client.callTool(
        meta ? { name, arguments: args, _meta: meta } : { name, arguments: args },
        { timeout: timeoutMs },
      );
      this.failures = 0;
      return result;
    } catch (err) {
      // The person's grant is gone (oauth-accounts.ts): they connect again; the server is fine.
      if (err instanceof ConsentNeeded) throw err;
      if (err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout) {
        const alive = await answers(client, Math.min(this.deps.livenessTimeoutMs ?? 5000, timeoutMs));
        if (!alive) await this.drop(client, `it stopped answering (a call to ${name} timed out)`, true);
        throw new UpstreamError(
          `${this.label}: ${name} did not finish within ${statedMs} ms and was cancelled` +
            (alive ? '' : '; the server no longer answers and will be restarted on next use'),
        );
      }
      if (err instanceof ProtocolError) {
        throw new UpstreamError(this.deps.redactor.text(`${this.label} refused ${name}: ${err.message}`));
      }
      if (this.client !== client || (err instanceof SdkError && err.code === SdkErrorCode.ConnectionClosed)) {
        await this.drop(client, this.exitReason(), false);
        throw new UpstreamError(
          this.deps.redactor.text(
            `${this.label} stopped during the call to ${name} (${this.reason}); it will be restarted on next use`,
          ),
        );
      }
      // An HTTP server that cannot be reached any more (gone, refusing, no such host): down, with the reason,
      // until the next attempt after the back-off; a stdio server's end is its exit, handled above.
      const unreachable = this.spec.transport === 'stdio' ? undefined : networkFailure(err);
      if (unreachable) {
        await this.drop(client, `cannot reach it (${unreachable})`, false);
        throw new UpstreamError(
          this.deps.redactor.text(
            `${this.label} is not available: ${this.reason}; it is tried again on later calls`,
          ),
        );
      }
      throw new UpstreamError(
        this.deps.redactor.text(`${this.label}: ${name} failed: ${(err as Error).message}`),
      );
    }
  }

  /** The server's prompts and resources (upstream-client.ts relay), counted as in use. */
  async passthrough<K extends Passthrough>(
    method: K,
    params?: Parameters<Client[K]>[0],
  ): Promise<Awaited<ReturnType<Client[K]>>> {
    return this.using(() => this.pass(method, params));
  }

  private async pass<K extends Passthrough>(
    method: K,
    params?: Parameters<Client[K]>[0],
  ): Promise<Awaited<ReturnType<Client[K]>>> {
    await this.ensureUp();
    const timeout = this.deps.livenessTimeoutMs ?? 30_000;
    return relay(this.client as Client, method, params, {
      label: this.label,
      redactor: this.deps.redactor,
      timeout,
    });
  }

  /** Stops the server (stdio: closes stdin, then signals its process group). */
  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = undefined;
    this.state = 'idle';
    await this.shutdown(client, this.transport);
  }

  private async connect(): Promise<void> {
    const stdio = this.spec.transport === 'stdio';
    if (stdio && this.deps.pool) {
      try {
        await this.deps.pool.admit(this);
      } catch (err) {
        throw new UpstreamError(`${this.label} was not started: ${(err as Error).message}`);
      }
    }
    this.state = 'connecting';
    const timeout = this.deps.connectTimeoutMs ?? 30_000;
    const maxMessageBytes = this.deps.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const { client, transport } = newClient(
      this.spec,
      { log: this.deps.log, maxMessageBytes, auth: this.deps.auth },
      this.owner,
    );
    this.transport = transport;
    try {
      await client.connect(transport, { timeout });
      const { tools } = await client.listTools(undefined, { timeout });
      if (this.closed) throw new Error('the connection was closed while connecting');
      this.client = client;
      this.tools = tools;
      if (this.state === 'connecting' && this.reason) this.restarts++;
      this.state = 'up';
      this.reason = undefined;
      this.idleReason = undefined;
      this.deps.log.info({ upstream: this.label, tools: tools.length }, 'upstream MCP server connected');
    } catch (err) {
      const detail = transport instanceof StdioTransport ? transport.describeExit() : '';
      await this.shutdown(client, transport);
      if (err instanceof ConsentNeeded) {
        this.state = 'idle';
        throw err;
      }
      const unreachable = transport instanceof StdioTransport ? undefined : networkFailure(err);
      this.fail(
        unreachable
          ? `cannot connect (${unreachable})`
          : `cannot connect: ${(err as Error).message}${detail ? ` (${detail})` : ''}`,
        1000,
      );
      throw new UpstreamError(`${this.label} is not available: ${this.reason}`);
    }
  }

  private toolsChanged(tools: Tool[]) {
    this.tools = tools;
    for (const listener of this.listeners) {
      try {
        listener(tools);
      } catch (err) {
        this.deps.log.warn({ upstream: this.label, err }, 'a tool-list listener failed');
      }
    }
  }

  private exitReason(): string {
    const t = this.transport;
    const detail = t instanceof StdioTransport ? t.describeExit() : '';
    return `the connection closed${detail ? `: ${detail}` : ''}`;
  }

  /** `minDelayMs`: a server that could not be reached is not tried again by the very next call (one attempt per call). */
  private fail(reason: string, minDelayMs = 0) {
    this.state = 'down';
    this.reason = this.deps.redactor.text(reason);
    this.failures++;
    this.nextAttemptAt = Date.now() + Math.max(minDelayMs, backoffMs(this.failures));
    this.deps.log.warn({ upstream: this.label, reason: this.reason }, 'upstream MCP server down');
  }

  /** Marks the server down and stops it; `kill` for a hung server that would not read its stdin. */
  private async drop(client: Client, reason: string, kill: boolean) {
    if (this.client !== client) return;
    this.client = undefined;
    this.fail(reason);
    const transport = this.transport;
    if (kill && transport instanceof StdioTransport) transport.kill();
    await this.shutdown(client, transport);
  }

  private async shutdown(client: Client | undefined, transport: McpConnection['transport']) {
    this.deps.pool?.left(this);
    try {
      if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
        await transport.terminateSession().catch(() => {});
      }
      if (client) await client.close();
      else await transport?.close();
    } catch (err) {
      this.deps.log.debug({ upstream: this.label, err }, 'closing an upstream failed');
    }
  }
}
