import { type Context, Hono } from 'hono';
import { HttpError, installBase, route } from '../lib/http.ts';
import type { Logger } from '../lib/log.ts';
import type { Metrics } from '../lib/metrics.ts';
import { serveOpenApi } from '../lib/openapi.ts';
import { healthDetail, requireRole, type Security } from '../lib/security.ts';
import type { Backend } from './backends/backend.ts';
import { type PromptCatalog, PromptError, UnknownPromptError } from './catalog/prompts.ts';
import * as contract from './contract.ts';
import { DEFAULT_SESSION, gatewayRoutes as routes, TASK_HEADER } from './contract.ts';
import { type AuditActor, withActor } from './core/audit-context.ts';
import type { Gateway } from './core/gateway.ts';
import { REFUSAL_STATUS, Refusal } from './core/refusals.ts';
import type { McpFace } from './face/face.ts';

/** The MCP face's routes: all toolsets at /mcp, views at /mcp/toolsets/<ids>. */
const isFacePath = (path: string) => path === '/mcp' || path.startsWith('/mcp/toolsets/');

/** Who a request is, for the audit trail: the operator, the model in a task, an MCP client, a user. */
function actorOf(c: Context): AuditActor {
  const principal = c.get('principal');
  const role = principal?.role ?? 'local';
  const task = c.req.header(TASK_HEADER);
  if ((role === 'agent' || role === 'local') && task && /^[A-Za-z0-9_.:-]{1,128}$/.test(task)) {
    return { actor: `model in task ${task}`, task_id: task };
  }
  if (isFacePath(c.req.path)) return { actor: `mcp client (${role})` };
  return { actor: role === 'approver' ? 'user (AGENT_API_TOKEN)' : role };
}

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
}

/** A refusal of the gateway's rules as an HTTP error: its status from REFUSAL_STATUS, its code in the body. */
function refusalAsHttpError(err: unknown): HttpError | undefined {
  if (!(err instanceof Refusal)) return undefined;
  const retry = err.details.retry_after_s;
  return new HttpError(
    REFUSAL_STATUS[err.code],
    err.message,
    { code: err.code, ...err.details },
    typeof retry === 'number' ? { 'retry-after': String(retry) } : {},
  );
}

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
  route(app, routes.changeToolsets, async (c, { body }) => {
    // One route serves both: a session's toolsets (agent or operator) and the global ceiling (operator only).
    const operator = body.action === 'ENABLE' || body.action === 'DISABLE';
    if (operator) requireRole(c, ['admin'], body.action);
    const result = await gateway.changeToolsets(body);
    if (operator) await deps.face.announce();
    return c.json(result);
  });
  route(app, routes.manageToolsets, async (c, { body }) => {
    const res = await gateway.manageToolsets(body.session_id, body.arguments);
    // A change comes back with the session's new tool list: the agent's next request needs it anyway.
    return c.json(res.change ? { ...res, tools: gateway.tools(body.session_id) } : res);
  });
  route(app, routes.changeDefaults, async (c, { body }) => {
    requireRole(c, ['admin'], 'Changing the default toolsets');
    const result = gateway.changeDefaults(body);
    // MCP sessions that never changed their toolsets follow the defaults: their tool lists changed.
    await deps.face.announce();
    return c.json(result);
  });
  route(app, routes.approveToolset, async (c, { params, body }) => {
    requireRole(c, ['admin'], 'Approving upstream tools');
    const result = gateway.approveToolset(params.id, body.tools);
    await deps.face.announce();
    return c.json(result);
  });
  route(app, routes.reloadToolsets, async (c) => {
    requireRole(c, ['admin'], 'Reloading the toolsets');
    // The policy and the playbooks first: a malformed one is a 400 before anything has changed.
    gateway.ceiling.reloadPolicy();
    try {
      deps.prompts.reload();
    } catch (err) {
      if (err instanceof PromptError) throw new Refusal('invalid_config', err.message);
      throw err;
    }
    const result = await gateway.reloadToolsets();
    await deps.face.announce();
    return c.json(result);
  });
  route(app, routes.listToolsets, (c, { query }) =>
    c.json(gateway.listToolsets(query.session_id, query.query)),
  );
  route(app, routes.toolsetTools, (c, { params }) => {
    const tools = gateway.toolsetTools(params.id);
    if (!tools) throw new HttpError(404, `Unknown toolset ${params.id}; GET /mcp/admin/toolsets lists them`);
    return c.json({ toolset: params.id, tools });
  });
  route(app, routes.listTools, (c, { query }) => {
    const sessionId = query.session_id ?? DEFAULT_SESSION;
    return c.json({ session_id: sessionId, tools: gateway.tools(sessionId) });
  });
  route(app, routes.callTool, async (c, { params, body }) =>
    c.json(await gateway.callTool(body.session_id ?? DEFAULT_SESSION, params.name, body.arguments)),
  );
  route(app, routes.health, async (c) => {
    const backends = Object.fromEntries(
      await Promise.all(Object.values(deps.backends).map(async (b) => [b.name, await b.health()] as const)),
    );
    const ok = Object.values(backends).every((b) => b.ok);
    // Upstream MCP servers are reported, not required: one that is down is restarted on next use.
    const upstreams = gateway.upstreams();
    // Without a token, only whether it is up: upstream reasons carry stderr lines (a database URL with its
    // password once), pids and commands.
    if (!healthDetail(c)) {
      return ok ? c.json({ status: 'ok' as const }) : c.json({ error: 'a backend is unhealthy' }, 503);
    }
    return ok
      ? c.json({ status: 'ok' as const, backends, upstreams })
      : c.json({ error: 'a backend is unhealthy', backends, upstreams }, 503);
  });
  route(app, routes.getPolicy, (c) => c.json(gateway.ceiling.policy()));
  route(app, routes.reloadPolicy, (c) => c.json(gateway.ceiling.reloadPolicy()));
  route(app, routes.listApprovals, (c, { query }) =>
    c.json({ approvals: gateway.ceiling.approvals.list(query) }),
  );
  route(app, routes.getApproval, (c, { params }) => {
    const approval = gateway.ceiling.approvals.get(params.id);
    if (!approval)
      throw new Refusal('not_found', `No approval ${params.id}; GET /mcp/admin/approvals lists them`);
    return c.json(approval);
  });
  route(app, routes.decideApproval, (c, { params, body }) =>
    c.json(gateway.decideApproval(params.id, body.approve, actorOf(c).actor, body.reason)),
  );
  route(app, routes.listAudit, (c, { query }) => c.json(gateway.listAudit(query)));
  // A page of rows read each time the client has taken the last: memory stays one page, whatever the table holds.
  route(app, routes.exportAudit, (c, { query }) => {
    const pages = gateway.exportAudit(query);
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = pages.next();
        if (next.done) return controller.close();
        controller.enqueue(encoder.encode(next.value.map((row) => `${JSON.stringify(row)}\n`).join('')));
      },
      cancel() {
        pages.return(undefined);
      },
    });
    return c.body(body, 200, {
      'content-type': 'application/x-ndjson; charset=utf-8',
      'content-disposition': 'attachment; filename="toolshift-audit.jsonl"',
      'cache-control': 'no-store',
    });
  });
  route(app, routes.listPrompts, (c) => c.json({ prompts: deps.prompts.list() }));
  route(app, routes.renderPrompt, (c, { params, body }) => {
    try {
      return c.json(deps.prompts.render(params.name, body.arguments));
    } catch (err) {
      if (err instanceof PromptError)
        throw new Refusal(err instanceof UnknownPromptError ? 'not_found' : 'invalid_arguments', err.message);
      throw err;
    }
  });
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
