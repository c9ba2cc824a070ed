import { Hono } from 'hono';
import { installBase, route } from '../lib/http/http.ts';
import { serveOpenApi } from '../lib/http/openapi.ts';
import { healthDetail, type Security } from '../lib/http/security.ts';
import type { Logger } from '../lib/telemetry/log.ts';
import type { Metrics } from '../lib/telemetry/metrics.ts';
import { GENAI, trace } from '../lib/telemetry/tracing.ts';
import { type CallRecord, createCallRecord } from './call-record.ts';
import * as contract from './contract.ts';
import { IDEMPOTENCY_HEADER, toolServerRoutes as routes, SESSION_HEADER } from './contract.ts';
import type { ToolContext } from './kit/define.ts';
import type { ToolRegistry } from './registry.ts';

/** What the tool-server's app needs; tests pass their own. `C`: the context its tools are called with. */
export interface ToolServerDeps<C extends ToolContext = ToolContext> {
  registry: ToolRegistry<C>;
  /** The service's metrics; default: a fresh registry. */
  metrics?: Metrics;
  context: C;
  log: Logger;
  security: Security;
  /** The record of keyed calls (call-record.ts); default: a fresh one. */
  calls?: CallRecord;
}

/** The tool-server's HTTP API; only main.ts listens. */
export function createToolServerApp<C extends ToolContext>(deps: ToolServerDeps<C>): Hono {
  const app = new Hono();
  installBase(app, deps.log, deps.security, { metrics: deps.metrics });
  const calls = deps.calls ?? createCallRecord();
  route(app, routes.listTools, (c) => c.json(deps.registry.definitions()));
  route(app, routes.callTool, async (c, { params, headers, body }) => {
    // The request's span (tracing on: a hop of a traced call) names the tool and says how it ended.
    const span = trace.getActiveSpan();
    span?.setAttribute(GENAI.toolName, params.name);
    const session = headers[SESSION_HEADER];
    const run = () =>
      deps.registry.call(params.name, body ?? {}, session ? { ...deps.context, session } : deps.context);
    const key = headers[IDEMPOTENCY_HEADER];
    const result = await (key ? calls.run(key, params.name, run) : run());
    if (span && !result.success) span.setAttribute(GENAI.errorType, 'tool_error');
    return c.json(result);
  });
  // Without a token, only whether it is up (like every service): the rest is for the service's callers.
  route(app, routes.health, (c) =>
    healthDetail(c)
      ? c.json({ status: 'ok' as const, tools: deps.registry.definitions().length })
      : c.json({ status: 'ok' as const }),
  );
  serveOpenApi(app, {
    service: 'tool-server',
    routes,
    schemas: contract,
    about: 'The tool-server: the native tools (files, web, git, database), called by the gateway.',
  });
  return app;
}
