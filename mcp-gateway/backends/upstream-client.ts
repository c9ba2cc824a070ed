import {
  type AuthProvider,
  Client,
  type ClientOptions,
  StreamableHTTPClientTransport,
  type Tool,
} from '@modelcontextprotocol/client';
import type { Logger } from '../../lib/telemetry/log.ts';
import { limitedFetch, type MessageTooLargeError } from './message-limit.ts';
import type { Redactor } from './redactor.ts';
import { StdioTransport } from './stdio-transport.ts';
import { type McpServerSpec, UpstreamError } from './upstream-types.ts';

// The SDK client of one attempt to reach an upstream server, over stdio or HTTP, with the callbacks the server
// can trigger; the connection (mcp-connection.ts) keeps which client is current and what a failure does.
//
// No callback an upstream can trigger may throw into the process (all three services share it). Those
// installed here, and why none can (the stdio transport's own listeners are audited in stdio-transport.ts):
// - client.onclose: only calls the owner's lost(), which is async; its failure is logged.
// - client.onerror: logs.
// - listChanged.tools.onChanged (after notifications/tools/list_changed): an error (e.g. the new list
//   over UPSTREAM_MAX_MESSAGE_BYTES, which also stops the server) is ignored here and surfaces as the
//   toolset being down; each catalog listener runs inside try/catch (mcp-connection.ts).
// - HTTP: limitedFetch's TransformStream counts each body; over the cap it errors that stream (the SDK's
//   reader catches it and reports to onerror) and calls tooLarge(), which logs and starts an async lost().
//   The SDK's own SSE reader, reconnection timer and fetch promises catch into onerror.
// - Timers: the SDK's request timeouts reject the call's promise; close()'s waits are unref'd promises.

export type UpstreamTransport = StdioTransport | StreamableHTTPClientTransport;

/** The connection a client reports to. */
export interface ClientOwner {
  readonly label: string;
  /** Whether `client` is the connection's current one: a replaced client's events are ignored. */
  owns(client: Client): boolean;
  /** The server's new tool list, after notifications/tools/list_changed. */
  toolsChanged(tools: Tool[]): void;
  /** The server is lost to `client`: why, when known here (else the transport tells how it ended). */
  lost(client: Client, reason?: string): Promise<void>;
}

/** A client of `spec` and its transport, not connected yet. */
export function newClient(
  spec: McpServerSpec,
  opts: { log: Logger; maxMessageBytes: number; auth?: AuthProvider },
  owner: ClientOwner,
): { client: Client; transport: UpstreamTransport } {
  const { log } = opts;
  const upstream = owner.label;
  const lose = (client: Client, reason?: string) => {
    owner.lost(client, reason).catch((err) => log.warn({ upstream, err }, 'dropping an upstream failed'));
  };
  const options: ClientOptions = {
    listChanged: {
      tools: {
        onChanged: (error, tools) => {
          if (!owner.owns(client)) return;
          if (error || !tools) {
            // The old list stays; a list over the cap has also stopped the server (it shows down).
            log.warn(
              { upstream, reason: error?.message.slice(0, 500) },
              'refreshing the tool list after list_changed failed',
            );
            return;
          }
          owner.toolsChanged(tools);
        },
      },
    },
  };
  if (spec.protocol === 'auto') options.versionNegotiation = { mode: 'auto' };
  if (spec.protocol === '2026-07-28') options.versionNegotiation = { mode: { pin: '2026-07-28' } };
  const client = new Client({ name: 'toolshift-gateway', version: '0.1.0' }, options);
  // A message over the cap: stdio stops the child itself (its close ends the connection); over HTTP the
  // body is cut and the connection dropped here, so pending calls fail now rather than at their timeout.
  const tooLarge = (err: MessageTooLargeError) => {
    log.warn({ upstream, reason: err.message }, 'upstream message over the cap');
    if (owner.owns(client)) lose(client, err.message);
    else client.close().catch(() => {});
  };
  const transport =
    spec.transport === 'stdio'
      ? new StdioTransport({
          command: spec.command,
          args: spec.args,
          env: spec.env,
          cwd: spec.cwd,
          maxMessageBytes: opts.maxMessageBytes,
        })
      : new StreamableHTTPClientTransport(new URL(spec.url), {
          requestInit: { headers: spec.headers },
          fetch: limitedFetch(opts.maxMessageBytes, tooLarge),
          ...(opts.auth ? { authProvider: opts.auth } : {}),
        });
  if (transport instanceof StdioTransport) {
    transport.onOverflow = (err) =>
      log.warn({ upstream, reason: err.message }, 'upstream message over the cap');
  }
  client.onclose = () => {
    if (owner.owns(client)) lose(client);
  };
  // Transport errors the SDK does not tie to a call (a line that is not JSON-RPC, a cut SSE stream): logged;
  // a call they affect fails on its own (closed connection or timeout).
  client.onerror = (err) => log.debug({ upstream, err }, 'upstream transport error');
  return { client, transport };
}

export type Passthrough = 'listPrompts' | 'getPrompt' | 'listResources' | 'readResource';

/**
 * A server's prompts and resources, for a fixed view of its toolset (the MCP face passes them through). A server
 * without the capability has none; what comes back is redacted like tool results.
 */
export async function relay<K extends Passthrough>(
  client: Client,
  method: K,
  params: Parameters<Client[K]>[0] | undefined,
  opts: { label: string; redactor: Redactor; timeout: number },
): Promise<Awaited<ReturnType<Client[K]>>> {
  const capability = method.endsWith('Prompts') || method === 'getPrompt' ? 'prompts' : 'resources';
  if (!client.getServerCapabilities()?.[capability]) {
    if (method === 'listPrompts') return { prompts: [] } as Awaited<ReturnType<Client[K]>>;
    if (method === 'listResources') return { resources: [] } as Awaited<ReturnType<Client[K]>>;
    throw new UpstreamError(`${opts.label} serves no ${capability}`);
  }
  const call = client[method] as (p: unknown, o: { timeout: number }) => Promise<unknown>;
  const result = await call.call(client, params, { timeout: opts.timeout });
  return opts.redactor.deep(result) as Awaited<ReturnType<Client[K]>>;
}

/** Whether the server still answers: a discovery (2026 era) or a ping, within `timeout`. */
export async function answers(client: Client, timeout: number): Promise<boolean> {
  try {
    if (client.getProtocolEra() === 'modern') await client.discover({ timeout });
    else await client.ping({ timeout });
    return true;
  } catch {
    return false;
  }
}

/**
 * Socket-level codes of a request that never reached its HTTP server (refused, no such host, no route): the
 * server is unreachable for every session. A socket lost mid-request (reset, closed) is not among them: it may
 * be one connection's fault, and the call may have run, so it fails only that call.
 */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * The code of the socket error that kept a request from reaching its HTTP server (`fetch failed` carries it as
 * its cause), or undefined. Only the code: the socket's message names the resolved address, which a
 * `${VAR}` in the toolset file keeps out of listings.
 */
export function networkFailure(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 4; depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && UNREACHABLE.has(code)) return code;
    e = e.cause;
  }
  return undefined;
}
