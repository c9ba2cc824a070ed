import { callRoute, type ServiceEndpoint, ServiceError } from '../../lib/http-client.ts';
import { type ToolResult, toolServerRoutes } from '../../tool-server/contract.ts';
import type { Backend } from './backend.ts';

/** The native tool-server reached over HTTP. */
export function toolServerBackend(endpoint: ServiceEndpoint, name = 'tool-server'): Backend {
  return {
    name,
    listTools: () => callRoute(endpoint, toolServerRoutes.listTools),
    async callTool(tool, args, signal): Promise<ToolResult> {
      try {
        return await callRoute(
          endpoint,
          toolServerRoutes.callTool,
          { params: { name: tool }, body: args },
          { signal },
        );
      } catch (err) {
        // The tool-server refusing the arguments is the call's failure, reported to the model like any other.
        if (err instanceof ServiceError && err.status === 400) {
          return { success: false, result: null, error: err.message, execution_time_ms: 0 };
        }
        throw err;
      }
    },
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
