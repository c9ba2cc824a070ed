import { Hono } from 'hono';
import { HttpError, installBase, route } from '../lib/http/http.ts';
import { ServiceError } from '../lib/http/http-client.ts';
import { localHop } from '../lib/http/local-hop.ts';
import { serveOpenApi } from '../lib/http/openapi.ts';
import { healthDetail, type Security } from '../lib/http/security.ts';
import type { Logger } from '../lib/telemetry/log.ts';
import type { Metrics } from '../lib/telemetry/metrics.ts';
import { GENAI, trace } from '../lib/telemetry/tracing.ts';
import { type CallRecord, createCallRecord } from './call-record.ts';
import * as contract from './contract.ts';
import {
  IDEMPOTENCY_HEADER,
  toolServerRoutes as routes,
  SESSION_HEADER,
  type ToolServerLocal,
} from './contract.ts';
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

/** Runs one call: with a key, once per key (call-record.ts); `session` as the session header carries it. */
function caller<C extends ToolContext>(
  deps: ToolServerDeps<C>,
  calls: CallRecord,
): ToolServerLocal['callTool'] {
  return (name, args, call) => {
    const session = call?.session;
    const run = () => deps.registry.call(name, args, session ? { ...deps.context, session } : deps.context);
    return call?.key ? calls.run(call.key, name, run) : run();
  };
}

/**
 * The tool-server for a gateway in the same process (start/stack.ts): its two working routes as functions, the
 * record of keyed calls the app's (give both the same `deps.calls`), a span per traced call as the HTTP route's
 * request would have, and its refusals (an unknown tool, bad arguments) as the gateway's HTTP client reads them.
 */
export function localToolServer<C extends ToolContext>(deps: ToolServerDeps<C>): ToolServerLocal {
  const callTool = caller(deps, deps.calls ?? createCallRecord());
  const asServiceError = (err: unknown) =>
    err instanceof HttpError
      ? new ServiceError(err.status, err.message, { error: err.message }, { service: 'tool-server' })
      : err;
  return {
    listTools: async () => deps.registry.definitions(),
    callTool: (name, args, call) => {
      const hop = { service: 'tool-server', log: deps.log, method: 'POST', route: '/tools/:name' };
      return localHop(
        { ...hop, path: `/tools/${name}` },
        async (span) => {
          span?.setAttribute(GENAI.toolName, name);
          const result = await callTool(name, args, call);
          if (span && !result.success) span.setAttribute(GENAI.errorType, 'tool_error');
          return result;
        },
        asServiceError,
      );
    },
  };
}

/** The tool-server's HTTP API; only main.ts listens. */
export function createToolServerApp<C extends ToolContext>(deps: ToolServerDeps<C>): Hono {
  const app = new Hono();
  installBase(app, deps.log, deps.security, { metrics: deps.metrics });
  const callTool = caller(deps, deps.calls ?? createCallRecord());
  route(app, routes.listTools, (c) => c.json(deps.registry.definitions()));
  route(app, routes.callTool, async (c, { params, headers, body }) => {
    // The request's span (tracing on: a hop of a traced call) names the tool and says how it ended.
    const span = trace.getActiveSpan();
    span?.setAttribute(GENAI.toolName, params.name);
    const result = await callTool(params.name, body ?? {}, {
      session: headers[SESSION_HEADER],
      key: headers[IDEMPOTENCY_HEADER],
    });
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
