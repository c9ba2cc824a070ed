import { callRoute, type ServiceEndpoint, untilAborted } from '../../lib/http/http-client.ts';
import {
  IDEMPOTENCY_HEADER,
  SESSION_HEADER,
  type ToolResult,
  type ToolServerLocal,
  toolServerRoutes,
} from '../../tool-server/contract.ts';
import type { Backend } from './backend.ts';

/** The native tool-server reached over HTTP. */
export function toolServerBackend(endpoint: ServiceEndpoint, name = 'tool-server'): Backend {
  return {
    name,
    listTools: () => callRoute(endpoint, toolServerRoutes.listTools),
    callTool: (tool, args, call): Promise<ToolResult> =>
      callRoute(
        endpoint,
        toolServerRoutes.callTool,
        {
          params: { name: tool },
          headers: {
            ...(call?.session ? { [SESSION_HEADER]: encodeURIComponent(call.session) } : {}),
            ...(call?.key ? { [IDEMPOTENCY_HEADER]: call.key } : {}),
          },
          body: args,
        },
        { signal: call?.signal },
      ),
    async health() {
      try {
        await callRoute(endpoint, toolServerRoutes.health);
        return { ok: true };
      } catch (err) {
        return { ok: false, detail: (err as Error).message };
      }
    },
  };
}

/**
 * The native tool-server in this process (start/stack.ts): its calls without a socket, the same in all else —
 * a call abandoned on its signal or after the deadline an HTTP call has (a 504, as callRoute's).
 */
export function localToolServerBackend(
  local: ToolServerLocal,
  name = 'tool-server',
  timeoutMs = 120_000,
): Backend {
  return {
    name,
    listTools: () => local.listTools(),
    callTool: (tool, args, call) =>
      untilAborted(
        local.callTool(tool, args, {
          // As the session header carries it over HTTP.
          session: call?.session ? encodeURIComponent(call.session) : undefined,
          key: call?.key,
        }),
        call?.signal,
        timeoutMs,
      ),
    // In this process: up while the process is.
    health: async () => ({ ok: true }),
  };
}
