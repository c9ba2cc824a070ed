import { callRoute, type ServiceEndpoint } from '../../lib/http/http-client.ts';
import {
  IDEMPOTENCY_HEADER,
  SESSION_HEADER,
  type ToolResult,
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
