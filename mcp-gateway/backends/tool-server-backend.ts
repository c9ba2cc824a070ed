import { callRoute, type ServiceEndpoint } from '../../lib/http-client.ts';
import { IDEMPOTENCY_HEADER, type ToolResult, toolServerRoutes } from '../../tool-server/contract.ts';
import type { Backend } from './backend.ts';

/** The native tool-server reached over HTTP. */
export function toolServerBackend(endpoint: ServiceEndpoint, name = 'tool-server'): Backend {
  return {
    name,
    listTools: () => callRoute(endpoint, toolServerRoutes.listTools),
    callTool: (tool, args, signal, key): Promise<ToolResult> =>
      callRoute(
        key ? { ...endpoint, headers: { ...endpoint.headers, [IDEMPOTENCY_HEADER]: key } } : endpoint,
        toolServerRoutes.callTool,
        { params: { name: tool }, body: args },
        { signal },
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
