import { type Context, Hono } from 'hono';
import { databaseHealth } from '../lib/db/reachability.ts';
import type { RouteSpec } from '../lib/http/contract.ts';
import { HttpError, installBase, type RouteInput, route as register } from '../lib/http/http.ts';
import { serveOpenApi } from '../lib/http/openapi.ts';
import { healthDetail, requireRole, type Security } from '../lib/http/security.ts';
import type { Sealer } from '../lib/identity/sealed.ts';
import type { IdentityStore } from '../lib/identity/store.ts';
import type { Logger } from '../lib/telemetry/log.ts';
import type { Metrics } from '../lib/telemetry/metrics.ts';
import { actorOf } from './actors.ts';
import { accountRoutesOf } from './admin/accounts.ts';
import { connectRoutesOf } from './admin/connect.ts';
import { identityAdminRoutes } from './admin/identity.ts';
import { inSight, visibleUsers } from './admin/scope.ts';
import { withActor } from './audit-context.ts';
import type { Backend } from './backends/backend.ts';
import type { OAuthAccounts } from './backends/oauth-accounts.ts';
import type { Catalog } from './catalog/catalog.ts';
import { type PromptCatalog, PromptError, UnknownPromptError } from './catalog/prompts.ts';
import * as contract from './contract.ts';
import { DEFAULT_SESSION, gatewayRoutes as routes } from './contract.ts';
import type { Gateway } from './core/gateway.ts';
import { unknownApproval } from './core/operator.ts';
import type { McpFace } from './face/face.ts';
import { announceFenceOf, callForAgent, manageAndList } from './local.ts';
import { Refusal, refusalAsHttpError } from './refusals.ts';

/** What the gateway's app needs; tests pass their own. */
export interface GatewayDeps {
  gateway: Gateway;
  /** The service's metrics (gateway-metrics.ts adds its series); default: a fresh registry. */
  metrics?: Metrics;
  backends: Record<string, Backend>;
  log: Logger;
  security: Security;
  /** The MCP face served at /mcp (mcp/face.ts). */
  face: McpFace;
  /** The playbook prompts (prompts.ts), also served by the face. */
  prompts: PromptCatalog;
  /** The users, keys and teams (lib/identity): their admin routes; absent, those routes are not served. */
  identity?: IdentityStore;
  /**
   * People's own upstream accounts: what their values are sealed with (GATEWAY_SEAL_KEY) and the catalog that says
   * which secrets a toolset takes; absent, /mcp/me/* is not served.
   */
  accounts?: {
    sealer: Sealer;
    catalog: Catalog;
    oauth?: OAuthAccounts;
    connectUrl?: (toolset: string) => string;
  };
}

/** Registers a REST route, its session claimed first (createGatewayApp). */
type Route = <S extends RouteSpec>(
  spec: S,
  handler: (c: Context, input: RouteInput<S>) => Response | Promise<Response>,
) => void;

/** The gateway's HTTP API; only main.ts listens. */
export function createGatewayApp(deps: GatewayDeps): Hono {
  const { gateway } = deps;
  const app = new Hono();
  installBase(app, deps.log, deps.security, {
    metrics: deps.metrics,
    asHttpError: refusalAsHttpError,
  });
  // Every audit row of the request records who acted (audit-context.ts).
  app.use('*', (c, next) => withActor(actorOf(c), next));
  /**
   * Every REST route is registered here: the session a request names (`session_id`, in its body or its query) is
   * claimed before the route runs, so no route acts in (or reads) one of the MCP face's sessions for a credential
   * that does not own it. The searches of the operator's records (approvals, the audit) are the exception: their
   * `session_id` filters what those routes show of every session anyway.
   */
  const route: Route = (spec, handler) =>
    register(app, spec, async (c, input) => {
      for (const part of [input.body, input.query]) {
        const id = (part as { session_id?: unknown } | undefined)?.session_id;
        if (typeof id !== 'string') continue;
        // A person's key (not the operator's) names none of the agent's sessions: theirs are on the agent-server.
        if (!id.startsWith('mcp_') && (await visibleUsers(c)) !== undefined) {
          throw new HttpError(
            400,
            "A user's key names no session here but its own MCP handles; a task's session is read on the agent-server",
          );
        }
        await deps.face.claimSession(c, id);
      }
      return handler(c, input);
    });
  toolsetRoutes(route, deps);
  callRoutes(route, gateway);
  healthRoute(route, deps);
  operatorRoutes(app, route, gateway);
  promptRoutes(route, deps.prompts);
  if (deps.identity) identityAdminRoutes(app, deps.identity);
  if (deps.identity && deps.accounts) {
    accountRoutesOf(app, { identity: deps.identity, ...deps.accounts });
    connectRoutesOf(app, { identity: deps.identity, ...deps.accounts });
  }
  deps.face.mount(app);
  serveOpenApi(app, {
    service: 'mcp-gateway',
    routes: { ...routes, ...contract.mcpFaceRoutes },
    schemas: contract,
    about:
      "The MCP gateway: the toolset catalog, each session's active toolsets, the operator's policy and approvals, the audit trail, and tool calls routed to the tool-server or upstream MCP servers. Its MCP face is `/mcp`.",
  });
  return app;
}

/** A session's toolsets and tools, the defaults, and the operator's changes of the catalog. */
function toolsetRoutes(route: Route, deps: GatewayDeps): void {
  const { gateway } = deps;
  route(routes.changeToolsets, async (c, { body }) => {
    // One route serves both: a session's toolsets (agent or operator) and the global ceiling (operator only).
    const operator = body.action === 'ENABLE' || body.action === 'DISABLE';
    if (operator) requireRole(c, ['admin'], body.action);
    const result = await gateway.changeToolsets(body);
    if (operator) await deps.face.announce();
    return c.json(result);
  });
  route(routes.manageToolsets, async (c, { body }) =>
    c.json(await manageAndList(gateway, body.session_id, body.arguments)),
  );
  route(routes.changeDefaults, async (c, { body }) => {
    requireRole(c, ['admin'], 'Changing the default toolsets');
    const result = await gateway.changeDefaults(body);
    // MCP sessions that never changed their toolsets follow the defaults: their tool lists changed.
    await deps.face.announce();
    return c.json(result);
  });
  route(routes.approveToolset, async (c, { params, body }) => {
    requireRole(c, ['admin'], 'Approving upstream tools');
    const result = await gateway.approveToolset(params.id, body.tools);
    await deps.face.announce();
    return c.json(result);
  });
  route(routes.reloadToolsets, async (c) => {
    requireRole(c, ['admin'], 'Reloading the toolsets');
    // Each file is its own: a policy that does not load leaves the running policy in force, a prompt file
    // that does not load is skipped, and both are named in the warnings while everything else reloads.
    const warnings: string[] = [];
    try {
      gateway.ceiling.reloadPolicy();
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      warnings.push(`${err.message} (the running policy stays in force until the file loads)`);
    }
    warnings.push(...deps.prompts.reload().warnings);
    const result = await gateway.reloadToolsets();
    await deps.face.announce();
    return c.json({
      ...result,
      warnings: [...warnings, ...result.warnings],
      policy: gateway.ceiling.policySummary(),
    });
  });
  route(routes.listToolsets, async (c, { query }) =>
    c.json(await gateway.listToolsets(query.session_id, query.query)),
  );
  route(routes.toolsetTools, (c, { params }) => {
    const tools = gateway.toolsetTools(params.id);
    if (!tools) throw new HttpError(404, `Unknown toolset ${params.id}; GET /mcp/admin/toolsets lists them`);
    return c.json({ toolset: params.id, tools });
  });
  route(routes.listTools, async (c, { query }) => {
    const sessionId = query.session_id ?? DEFAULT_SESSION;
    return c.json({ session_id: sessionId, tools: await gateway.tools(sessionId) });
  });
}

/** Tool calls, and the fences of tasks taken over. */
function callRoutes(route: Route, gateway: Gateway): void {
  route(routes.callTool, async (c, { params, body }) =>
    c.json(
      await callForAgent(gateway, body.session_id ?? DEFAULT_SESSION, params.name, body.arguments, body),
    ),
  );
  route(routes.announceFence, async (c, { params, body }) =>
    c.json(await announceFenceOf(gateway, params.task_id, body.fence)),
  );
}

/** /health: the backends, the upstream servers and the database, in detail only to a caller with a token. */
function healthRoute(route: Route, deps: GatewayDeps): void {
  const { gateway } = deps;
  route(routes.health, async (c) => {
    const backends = Object.fromEntries(
      await Promise.all(Object.values(deps.backends).map(async (b) => [b.name, await b.health()] as const)),
    );
    const ok = Object.values(backends).every((b) => b.ok);
    // Upstream MCP servers are reported, not required: one that is down is restarted on next use.
    const upstreams = gateway.upstreams();
    // Without a token, only whether it is up: upstream reasons carry stderr lines (a database URL with its
    // password once), pids and commands.
    // PostgreSQL unreachable: `degraded` (what needs it answers 503 meanwhile; the gateway is up).
    const database = databaseHealth();
    const status = database.state === 'ok' ? ('ok' as const) : ('degraded' as const);
    if (!healthDetail(c)) {
      return ok ? c.json({ status }) : c.json({ error: 'a backend is unhealthy' }, 503);
    }
    const db = database.state === 'ok' ? {} : { database };
    return ok
      ? c.json({ status, backends, upstreams, ...db })
      : c.json({ error: 'a backend is unhealthy', backends, upstreams, ...db }, 503);
  });
}

/**
 * The operator's records: the policy, approvals and the audit trail. A user who is not the operator sees and
 * decides only the approvals and audit rows of the work in their sight (admin/scope.ts).
 */
function operatorRoutes(app: Hono, route: Route, gateway: Gateway): void {
  route(routes.getPolicy, (c) => c.json(gateway.ceiling.policy()));
  route(routes.reloadPolicy, (c) => c.json(gateway.ceiling.reloadPolicy()));
  register(app, routes.listApprovals, async (c, { query }) =>
    c.json({
      approvals: await gateway.ceiling.approvals.list({ ...query, for_users: await visibleUsers(c) }),
    }),
  );
  /** Approval `id` when it is in sight of `visible` (visibleUsers); otherwise as if it did not exist. */
  const approvalInSight = async (id: string, visible: readonly string[] | undefined) => {
    const approval = await gateway.ceiling.approvals.get(id);
    if (!approval || !inSight(visible, approval.for_user)) throw unknownApproval(id);
    return approval;
  };
  route(routes.getApproval, async (c, { params }) =>
    c.json(await approvalInSight(params.id, await visibleUsers(c))),
  );
  route(routes.decideApproval, async (c, { params, body }) => {
    const visible = await visibleUsers(c);
    if (visible) await approvalInSight(params.id, visible);
    return c.json(await gateway.decideApproval(params.id, body.approve, actorOf(c).actor, body.reason));
  });
  register(app, routes.listAudit, async (c, { query }) =>
    c.json(await gateway.listAudit({ ...query, for_users: await visibleUsers(c) })),
  );
  // A page of rows read each time the client has taken the last: memory stays one page, whatever the table holds.
  register(app, routes.exportAudit, async (c, { query }) => {
    const pages = gateway.exportAudit({ ...query, for_users: await visibleUsers(c) });
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await pages.next();
        if (next.done) return controller.close();
        controller.enqueue(encoder.encode(next.value.map((row) => `${JSON.stringify(row)}\n`).join('')));
      },
      async cancel() {
        await pages.return(undefined);
      },
    });
    return c.body(body, 200, {
      'content-type': 'application/x-ndjson; charset=utf-8',
      'content-disposition': 'attachment; filename="toolshift-audit.jsonl"',
      'cache-control': 'no-store',
    });
  });
}

/** The playbook prompts. */
function promptRoutes(route: Route, prompts: PromptCatalog): void {
  route(routes.listPrompts, (c) => c.json({ prompts: prompts.list() }));
  route(routes.renderPrompt, (c, { params, body }) => {
    try {
      return c.json(prompts.render(params.name, body.arguments));
    } catch (err) {
      if (err instanceof PromptError)
        throw new Refusal(err instanceof UnknownPromptError ? 'not_found' : 'invalid_arguments', err.message);
      throw err;
    }
  });
}
