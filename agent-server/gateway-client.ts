import { callRoute, type ServiceEndpoint } from '../lib/http-client.ts';
import { type ChangeToolsetsRequest, gatewayRoutes as routes } from '../mcp-gateway/contract.ts';

/** The agent-server's view of the gateway: the only way it learns or changes which tools a session has. */
export type GatewayClient = ReturnType<typeof createGatewayClient>;

/** A typed client over the gateway's contract routes; `signal` abandons a call (a task being stopped). */
export function createGatewayClient(endpoint: ServiceEndpoint) {
  return {
    listToolsets: (sessionId: string, query?: string, signal?: AbortSignal) =>
      callRoute(endpoint, routes.listToolsets, { query: { session_id: sessionId, query } }, { signal }),
    changeToolsets: (body: ChangeToolsetsRequest) => callRoute(endpoint, routes.changeToolsets, { body }),
    manageToolsets: (sessionId: string, args: Record<string, unknown>, signal?: AbortSignal) =>
      callRoute(
        endpoint,
        routes.manageToolsets,
        { body: { session_id: sessionId, arguments: args } },
        { signal },
      ),
    tools: async (sessionId: string, signal?: AbortSignal) =>
      (await callRoute(endpoint, routes.listTools, { query: { session_id: sessionId } }, { signal })).tools,
    callTool: (sessionId: string, name: string, args: Record<string, unknown>, signal?: AbortSignal) =>
      callRoute(
        endpoint,
        routes.callTool,
        { params: { name }, body: { session_id: sessionId, arguments: args } },
        { signal },
      ),
  };
}
