import { callRoute, type ServiceEndpoint, ServiceError, untilAborted } from '../../lib/http/http-client.ts';
import {
  BY_AGENT_HEADER,
  type CallFence,
  type ChangeToolsetsRequest,
  type GatewayLocal,
  type LocalCaller,
  OWNER_HEADER,
  RefusalCode,
  gatewayRoutes as routes,
  TASK_HEADER,
} from '../../mcp-gateway/contract.ts';

/** The agent-server's view of the gateway: the only way it learns or changes which tools a session has. */
export type GatewayClient = ReturnType<typeof routeClient> & {
  /**
   * The same client, its requests marked as acting for `taskId`, and as the work of its thread's `owner` when
   * that is a user (`user:<id>`): the gateway records the task's calls and approvals as theirs.
   */
  forTask(taskId: string, owner?: string): GatewayClient;
  /** The same client, its requests marked as the agent's own for the task (goal priming), not the model's. */
  priming(): GatewayClient;
  /** The same client, its requests marked as a run_code script's: the gateway audits them so and asks no human. */
  scripted(): GatewayClient;
};

/** Why the gateway refused a request (its error body's `code`); undefined for any other failure. */
export function refusalCode(err: unknown): RefusalCode | undefined {
  if (!(err instanceof ServiceError)) return undefined;
  const parsed = RefusalCode.safeParse((err.body as { code?: unknown } | undefined)?.code);
  return parsed.success ? parsed.data : undefined;
}

/**
 * A typed client over the gateway's contract routes; `signal` abandons a call (a task being stopped). With
 * `local` (the gateway in this process: start/stack.ts) the hot routes — the tool list, manage_toolsets, tool
 * calls, fences — are called directly, and the others are served by the gateway's app without a socket; the
 * gateway applies the same rules, roles, actor and audit either way (mcp-gateway/contract/local.ts).
 */
export function createGatewayClient(
  endpoint: ServiceEndpoint,
  local?: GatewayLocal,
  caller: LocalCaller = {},
): GatewayClient {
  const http: ServiceEndpoint = {
    ...endpoint,
    // The gateway's app in this process answers the other routes (a test's own fetch stays first).
    ...(local && !endpoint.fetch ? { fetch: local.fetch } : {}),
    headers: { ...endpoint.headers, ...headersOf(caller) },
  };
  const as = (more: LocalCaller) => createGatewayClient(endpoint, local, { ...caller, ...more });
  return {
    ...routeClient(http),
    ...(local ? localRoutes(local, caller, endpoint.timeoutMs ?? 120_000) : {}),
    forTask: (task, owner) => as({ task, owner: owner?.startsWith('user:') ? owner : undefined }),
    priming: () => as({ by: 'goal priming' }),
    scripted: () => as({ by: 'run_code' }),
  };
}

/** What a caller is, as the headers of an HTTP request to the gateway say it. */
function headersOf(caller: LocalCaller): Record<string, string> {
  return {
    ...(caller.task ? { [TASK_HEADER]: caller.task } : {}),
    ...(caller.owner ? { [OWNER_HEADER]: caller.owner } : {}),
    ...(caller.by ? { [BY_AGENT_HEADER]: caller.by } : {}),
  };
}

/**
 * The hot routes called in-process, each abandoned on `signal` or after the HTTP call's deadline; a call whose
 * signal is already aborted is not made at all (as a request would not be sent).
 */
function localRoutes(local: GatewayLocal, caller: LocalCaller, timeoutMs: number) {
  const within = <T>(start: () => Promise<T>, signal?: AbortSignal) =>
    signal?.aborted ? Promise.reject(signal.reason) : untilAborted(start(), signal, timeoutMs);
  return {
    listToolsets: (sessionId: string, query?: string, signal?: AbortSignal) =>
      within(() => local.listToolsets(caller, sessionId, query), signal),
    manageToolsets: (sessionId: string, args: Record<string, unknown>, signal?: AbortSignal) =>
      within(() => local.manageToolsets(caller, sessionId, args), signal),
    tools: (sessionId: string, signal?: AbortSignal) => within(() => local.tools(caller, sessionId), signal),
    callTool: (
      sessionId: string,
      name: string,
      args: Record<string, unknown>,
      signal?: AbortSignal,
      call?: { idempotency_key: string; fence?: CallFence },
    ) => within(() => local.callTool(caller, sessionId, name, args, call), signal),
    announceFence: (taskId: string, fence: number, signal?: AbortSignal) =>
      within(() => local.announceFence(caller, taskId, fence), signal),
  } satisfies Partial<ReturnType<typeof routeClient>>;
}

function routeClient(endpoint: ServiceEndpoint) {
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
    /** `call`: the call's idempotency key and the lease it is sent under (docs/task-loop.md). */
    callTool: (
      sessionId: string,
      name: string,
      args: Record<string, unknown>,
      signal?: AbortSignal,
      call?: { idempotency_key: string; fence?: CallFence },
    ) =>
      callRoute(
        endpoint,
        routes.callTool,
        { params: { name }, body: { session_id: sessionId, arguments: args, ...call } },
        { signal },
      ),
    /** Takes a task over at the gateway: calls sent under a fence lower than `fence` are refused from now. */
    announceFence: (taskId: string, fence: number, signal?: AbortSignal) =>
      callRoute(endpoint, routes.announceFence, { params: { task_id: taskId }, body: { fence } }, { signal }),
    /** Renders a playbook prompt into a goal. */
    renderPrompt: (name: string, args: Record<string, string>) =>
      callRoute(endpoint, routes.renderPrompt, { params: { name }, body: { arguments: args } }),
    /** Whether `forUser` (`user:<id>`) has connected their own account for a toolset (a task's wait for it). */
    connectionFor: (toolset: string, forUser: string, signal?: AbortSignal) =>
      callRoute(
        endpoint,
        routes.connectionFor,
        { params: { toolset }, query: { for_user: forUser } },
        { signal },
      ),
    /** An approval's current state (the agent's own credential may read, never decide). */
    getApproval: (id: string, signal?: AbortSignal) =>
      callRoute(endpoint, routes.getApproval, { params: { id } }, { signal }),
    /**
     * Relays a human's decision with the human's own credential (`authorization`, the AGENT_API_TOKEN they
     * presented), never the agent's: the agent's token cannot decide approvals.
     */
    decideApproval: (id: string, body: { approve: boolean; reason?: string }, authorization?: string) =>
      callRoute(
        {
          ...endpoint,
          headers: {
            ...Object.fromEntries(
              Object.entries(endpoint.headers ?? {}).filter(([k]) => k !== 'authorization'),
            ),
            ...(authorization ? { authorization } : {}),
          },
        },
        routes.decideApproval,
        { params: { id }, body },
      ),
  };
}
