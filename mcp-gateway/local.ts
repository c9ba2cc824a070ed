import { randomUUID } from 'node:crypto';
import type { Hono } from 'hono';
import type { z } from 'zod';
import { ServiceError, untilAborted } from '../lib/http/http-client.ts';
import { HttpError } from '../lib/http/http-error.ts';
import { describeIssues } from '../lib/http/issues.ts';
import { localHop } from '../lib/http/local-hop.ts';
import type { Principal, Security } from '../lib/http/security.ts';
import { expectedDigest } from '../lib/http/token-match.ts';
import type { Logger } from '../lib/telemetry/log.ts';
import { callerActor } from './actors.ts';
import { withActor } from './audit-context.ts';
import {
  CallFence,
  type GatewayLocal,
  IdempotencyKey,
  ListToolsetsQuery,
  type LocalCaller,
  gatewayRoutes as routes,
  SessionId,
} from './contract.ts';
import type { Gateway } from './core/interface.ts';
import type { McpFace } from './face/face.ts';
import { Refusal, refusalAsHttpError } from './refusals.ts';

// The gateway's hot routes for a caller in the same process (contract/local.ts): the rules of core/ called
// directly, as the agent's principal, with what the HTTP route adds — the actor, the claim of the session, a
// span per hop where the request would have made one, and errors as the HTTP client would have read them.
// The route bodies below are the REST routes' too (app.ts), so the two ways differ only in transport.

/** manage_toolsets; a change comes back with the session's new tool list (the caller's next request needs it). */
export async function manageAndList(gateway: Gateway, sessionId: string, args: Record<string, unknown>) {
  const res = await gateway.manageToolsets(sessionId, args);
  return res.change ? { ...res, tools: await gateway.tools(sessionId) } : res;
}

/** A tool call by the agent or an operator: it may activate its toolset on the way (AUTO_ACTIVATE). */
export function callForAgent(
  gateway: Gateway,
  sessionId: string,
  name: string,
  args: Record<string, unknown>,
  call?: { idempotency_key?: string; fence?: CallFence },
) {
  return gateway.callTool(sessionId, name, args, {
    idempotency_key: call?.idempotency_key,
    fence: call?.fence,
    activate: true,
  });
}

/** Takes a task over: refused when another worker already holds it under a higher fence. */
export async function announceFenceOf(gateway: Gateway, taskId: string, fence: number) {
  const highest = await gateway.announceFence(taskId, fence);
  if (highest > fence)
    throw new Refusal('fenced', `Task ${taskId} is held under fence ${highest}, higher than ${fence}`, {
      fence: highest,
    });
  return { task_id: taskId, fence: highest };
}

/**
 * The principal the agent's token makes over HTTP (`local` when the gateway takes no tokens); undefined when the
 * gateway takes tokens but not the agent's, where every HTTP call of the agent would be refused too.
 */
function agentPrincipal(security: Security): Principal | undefined {
  if (security.tokens.length === 0) return { role: 'local' };
  const agent = security.tokens.find((t) => t.role === 'agent');
  if (!agent) return undefined;
  return {
    role: 'agent',
    variable: agent.variable,
    credential: expectedDigest(agent.token).toString('base64url'),
  };
}

export interface LocalDeps {
  gateway: Gateway;
  app: Hono;
  face: McpFace;
  security: Security;
  log: Logger;
}

/** The gateway's hot routes in-process, for the agent-server in the same process (start/stack.ts). */
export function localGateway(deps: LocalDeps): GatewayLocal {
  const { gateway } = deps;
  const principal = agentPrincipal(deps.security);
  const credential = principal?.role === 'agent' ? principal.credential : null;
  /** One hop: as the caller, its session claimed, as the route's request would have run (lib/http/local-hop.ts). */
  const hop = <T>(
    caller: LocalCaller,
    route: [method: string, route: string, path: string],
    sessionId: string | undefined,
    fn: () => Promise<T>,
  ) => {
    const [method, honoPath, path] = route;
    const asError = (err: unknown) => asServiceError(err, deps.log, path);
    const at = { service: 'mcp-gateway', log: deps.log, method, route: honoPath, path };
    if (!principal) {
      const message = `${method} ${path} needs GATEWAY_AGENT_TOKEN, which the gateway does not have`;
      return Promise.reject(new ServiceError(401, message, { error: message }, { service: 'mcp-gateway' }));
    }
    return withActor(callerActor(principal, caller), () =>
      localHop(
        at,
        async () => {
          if (sessionId !== undefined) {
            checked(SessionId, sessionId, 'session_id');
            await deps.face.claimSessionAs(credential, sessionId);
          }
          return fn();
        },
        asError,
      ),
    );
  };
  return {
    listToolsets: (caller, sessionId, query) =>
      hop(caller, ['GET', '/mcp/admin/toolsets', '/mcp/admin/toolsets'], sessionId, async () =>
        gateway.listToolsets(sessionId, checked(ListToolsetsQuery.shape.query, query, 'query')),
      ),
    manageToolsets: (caller, sessionId, args) =>
      hop(caller, ['POST', '/mcp/manage_toolsets', '/mcp/manage_toolsets'], sessionId, () =>
        manageAndList(gateway, sessionId, args),
      ),
    tools: (caller, sessionId) =>
      hop(caller, ['GET', '/mcp/tools', '/mcp/tools'], sessionId, () => gateway.tools(sessionId)),
    callTool: (caller, sessionId, name, args, call) =>
      hop(
        caller,
        ['POST', '/mcp/tools/:name/call', `/mcp/tools/${name.slice(0, 256)}/call`],
        sessionId,
        async () => {
          checked(routes.callTool.params, { name }, 'path parameters');
          checked(IdempotencyKey.optional(), call?.idempotency_key, 'idempotency_key');
          checked(CallFence.optional(), call?.fence, 'fence');
          return callForAgent(gateway, sessionId, name, args, call);
        },
      ),
    announceFence: (caller, taskId, fence) =>
      hop(
        caller,
        ['POST', '/mcp/tasks/:task_id/fence', `/mcp/tasks/${taskId}/fence`],
        undefined,
        async () => {
          checked(routes.announceFence.params, { task_id: taskId }, 'path parameters');
          return announceFenceOf(gateway, taskId, fence);
        },
      ),
    // Abandoned on the caller's signal, as a request would be (hono's app does not read it).
    fetch: (input, init) =>
      untilAborted(Promise.resolve(deps.app.request(input, init)), init?.signal ?? undefined),
  };
}

/**
 * What the route's schema would have refused, refused the same way: the scalar parts of a request (a session,
 * a key, a fence, a query), which the agent makes itself; the arguments are the tool's, checked by its schema.
 */
function checked<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new HttpError(400, `Invalid ${what}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/** An error as the agent's HTTP client reads the route's answer: its status, `error` and the body's details. */
function asServiceError(err: unknown, log: Logger, route: string): unknown {
  // A service behind the gateway unreachable or too slow is said as such (installBase's onError), as the
  // gateway's own answer.
  if (err instanceof ServiceError && (err.status === 502 || err.status === 504))
    return new ServiceError(err.status, err.message, { error: err.message }, { service: 'mcp-gateway' });
  const http = refusalAsHttpError(err) ?? err;
  const service = { service: 'mcp-gateway' };
  if (http instanceof HttpError)
    return new ServiceError(http.status, http.message, { error: http.message, ...http.details }, service);
  // As installBase's onError: logged here with an id, the caller told only the id.
  const id = randomUUID();
  log.error({ err, path: route, error_id: id }, 'unhandled error');
  const message = `Internal error (logged on the server as ${id})`;
  return new ServiceError(500, message, { error: message }, service);
}
