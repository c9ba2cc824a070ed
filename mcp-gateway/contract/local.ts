import type { ToolResult } from '../../tool-server/contract.ts';
import type { CallFence, GatewayTool, ListToolsetsResponse, ManageToolsetsResponse } from './toolsets.ts';

// The gateway's hot routes as called in the same process: when the agent and the gateway share one
// (`npm start`, `toolshift serve`), start/stack.ts hands the agent this instead of a socket. The same rules,
// roles, actor, audit, limits and trace spans as over HTTP, without the request, its JSON or the middleware.
// A refusal is thrown as the ServiceError an HTTP client would make of the route's answer (its status, and
// its body with `code`), so the agent tells the two apart by nothing.

/** Who calls: what an HTTP request's headers would say (TASK_HEADER, OWNER_HEADER, BY_AGENT_HEADER). */
export interface LocalCaller {
  task?: string;
  owner?: string;
  by?: 'goal priming' | 'run_code';
}

/** The hot routes in-process; every other route is served by `fetch` (the app, without a socket). */
export interface GatewayLocal {
  listToolsets(caller: LocalCaller, sessionId: string, query?: string): Promise<ListToolsetsResponse>;
  manageToolsets(
    caller: LocalCaller,
    sessionId: string,
    args: Record<string, unknown>,
  ): Promise<ManageToolsetsResponse>;
  tools(caller: LocalCaller, sessionId: string): Promise<GatewayTool[]>;
  callTool(
    caller: LocalCaller,
    sessionId: string,
    name: string,
    args: Record<string, unknown>,
    call?: { idempotency_key: string; fence?: CallFence },
  ): Promise<ToolResult & { activated?: ManageToolsetsResponse }>;
  announceFence(
    caller: LocalCaller,
    taskId: string,
    fence: number,
  ): Promise<{ task_id: string; fence: number }>;
  /** The gateway's app served in-process (request checks and all), for the routes above leaves out. */
  fetch(input: string, init?: RequestInit): Promise<Response>;
}
