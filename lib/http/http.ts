import { randomUUID } from 'node:crypto';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { routePath } from 'hono/route';
import { z } from 'zod';
import type { Logger } from '../telemetry/log.ts';
import { createMetrics, type Metrics, metricsRoute } from '../telemetry/metrics.ts';
import { context, extractContext, SpanKind, SpanStatusCode, trace, tracingOf } from '../telemetry/tracing.ts';
import type { RouteSpec } from './contract.ts';
import { SERVICE_HEADER, ServiceError } from './http-client.ts';
import { HttpError } from './http-error.ts';
import { describeIssues } from './issues.ts';
import { JsonInputError, parseJson } from './json.ts';
import { bodyText } from './node-request.ts';
import { REQUEST_ID_HEADER, requestIdFrom, withRequestId } from './request-id.ts';
import { requireRole, type Security, securityMiddleware, visibleUsers } from './security.ts';

export { ErrorBody, type EventStream, type RouteSpec } from './contract.ts';
export { HttpError };

type Part<S, K extends string> = S extends Record<K, infer T extends z.ZodType> ? z.output<T> : undefined;

/** What a handler receives: the request's parts, already parsed by the contract's schemas. */
export interface RouteInput<S extends RouteSpec> {
  params: Part<S, 'params'>;
  query: Part<S, 'query'>;
  headers: Part<S, 'headers'>;
  body: Part<S, 'body'>;
}

function parseWith<T extends z.ZodType>(schema: T, value: unknown, where: string): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new HttpError(400, `Invalid ${where}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

async function readJsonBody(c: Context): Promise<unknown> {
  const text = await bodyText(c, MAX_BODY_BYTES);
  if (text.trim() === '') return undefined;
  try {
    return parseJson(text);
  } catch (err) {
    if (err instanceof JsonInputError) {
      const why = err.kind === 'syntax' ? `is not valid JSON: ${err.detail}` : err.detail;
      throw new HttpError(400, `Request body ${why}`);
    }
    throw err;
  }
}

/** Registers `spec` on `app`; the handler only ever sees input that passed the contract's schemas. */
export function route<S extends RouteSpec>(
  app: Hono,
  spec: S,
  handler: (c: Context, input: RouteInput<S>) => Response | Promise<Response>,
): void {
  const honoPath = spec.path.replace(/\{(\w+)\}/g, ':$1');
  app.on(spec.method.toUpperCase(), honoPath, async (c) => {
    if (spec.roles) requireRole(c, spec.roles, `${spec.method.toUpperCase()} ${spec.path}`);
    const input = {
      params: spec.params ? parseWith(spec.params, c.req.param(), 'path parameters') : undefined,
      query: spec.query ? parseWith(spec.query, c.req.query(), 'query parameters') : undefined,
      headers: spec.headers ? parseWith(spec.headers, c.req.header(), 'headers') : undefined,
      body: spec.body ? parseWith(spec.body, await readJsonBody(c), 'request body') : undefined,
    } as RouteInput<S>;
    return handler(c, input);
  });
}

/** The largest request body any service reads (a whole file for write_file fits). */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

export { SERVICE_HEADER };

/** What installBase() may be given; a service passes its own metrics to add its series to the same registry. */
export interface BaseOptions {
  metrics?: Metrics;
  /** The service's own refusals as HTTP errors (the gateway's rules know no HTTP); others go on as they are. */
  asHttpError?: (err: unknown) => HttpError | undefined;
}

/** Where serverSpans leaves the request span's ids for the access line. */
const SPAN_IDS = 'toolshift.spanIds';

/**
 * With tracing on, a SERVER span per request that continues a trace (`traceparent`): the hops between the
 * services join the caller's trace. A request that carries none starts no trace (a health check, a poll, the
 * CLI; the MCP face starts one per tool call itself). Off: a pass-through.
 */
function serverSpans(service: string): MiddlewareHandler {
  return async (c, next) => {
    const tracing = tracingOf(service);
    if (!tracing) return next();
    const parent = extractContext({
      traceparent: c.req.header('traceparent'),
      tracestate: c.req.header('tracestate'),
    });
    if (!parent) return next();
    const span = tracing.tracer.startSpan(
      c.req.method,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': c.req.method, 'url.path': c.req.path.slice(0, 1024) },
      },
      parent,
    );
    const ids = span.spanContext();
    if (span.isRecording()) c.set(SPAN_IDS as never, { trace_id: ids.traceId, span_id: ids.spanId } as never);
    try {
      await context.with(trace.setSpan(parent, span), next);
    } finally {
      const matched = routePath(c, -1);
      if (matched !== '*' && matched !== '/*') {
        span.updateName(`${c.req.method} ${matched}`);
        span.setAttribute('http.route', matched);
      }
      span.setAttribute('http.response.status_code', c.res.status);
      if (c.res.status >= 500) {
        span.setAttribute('error.type', String(c.res.status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    }
  };
}

/**
 * What every service's app starts with, on every route: a request id (taken from `x-request-id` or made,
 * echoed back, carried on every log line and to the next service), an access line at debug and HTTP metrics,
 * the request checks of lib/http/security.ts (Host, Origin, Content-Type, tokens), a body size limit, JSON error
 * bodies for thrown errors and unknown routes (never a stack trace or an internal message), and GET /metrics.
 */
export function installBase(app: Hono, log: Logger, security: Security, opts: BaseOptions = {}): void {
  const metrics = opts.metrics ?? createMetrics();
  // Which service answered (the logger's name), so a client pointed at the wrong port can say so.
  const service = (log.bindings() as { name?: unknown }).name;
  app.onError((thrown, c) => {
    const err = opts.asHttpError?.(thrown) ?? thrown;
    if (err instanceof HttpError)
      return c.json({ error: err.message, ...err.details }, err.status, err.headers);
    // A service behind this one unreachable or too slow: said as such, not as this service's own failure.
    if (err instanceof ServiceError && (err.status === 502 || err.status === 504))
      return c.json({ error: err.message }, err.status);
    const id = randomUUID();
    log.error({ err, path: c.req.path, error_id: id }, 'unhandled error');
    return c.json({ error: `Internal error (logged on the server as ${id})` }, 500);
  });
  app.use('*', async (c, next) => {
    const requestId = requestIdFrom(c.req.header(REQUEST_ID_HEADER));
    c.header(REQUEST_ID_HEADER, requestId);
    if (typeof service === 'string') c.header(SERVICE_HEADER, service);
    const started = performance.now();
    await withRequestId(requestId, next);
    if (!c.res.headers.has(REQUEST_ID_HEADER)) c.res.headers.set(REQUEST_ID_HEADER, requestId);
    if (typeof service === 'string' && !c.res.headers.has(SERVICE_HEADER))
      c.res.headers.set(SERVICE_HEADER, service);
    const matched = routePath(c, -1);
    const routeLabel = matched === '*' || matched === '/*' ? 'unmatched' : matched;
    const seconds = (performance.now() - started) / 1000;
    metrics.httpRequests.inc({ method: c.req.method, route: routeLabel, status: String(c.res.status) });
    metrics.httpDuration.observe({ method: c.req.method, route: routeLabel }, seconds);
    withRequestId(requestId, () =>
      log.debug(
        {
          method: c.req.method,
          path: c.req.path,
          status: c.res.status,
          ms: Math.round(seconds * 1000),
          // The request's span (a traced hop), so the line leads to its trace.
          ...(c.get(SPAN_IDS as never) as object | undefined),
        },
        'request',
      ),
    );
  });
  for (const middleware of securityMiddleware(security)) app.use('*', middleware);
  // After the checks: a request refused (no token, a foreign Host) makes no span, whatever it carries.
  if (typeof service === 'string') app.use('*', serverSpans(service));
  const tooLarge = (c: Context) =>
    c.json({ error: `Request body is larger than ${MAX_BODY_BYTES} bytes` }, 413);
  const limit = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: tooLarge });
  app.use('*', (c, next) => {
    // A declared length is judged from the header, without opening the body as a stream (hono's bodyLimit
    // builds the whole WHATWG Request to ask whether there is a body); chunked bodies go through it as before.
    const length = c.req.header('content-length');
    if (length !== undefined && c.req.header('transfer-encoding') === undefined)
      return Number(length) > MAX_BODY_BYTES ? Promise.resolve(tooLarge(c)) : next();
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    return limit(c, next);
  });
  app.notFound((c) =>
    c.json({ error: `No route for ${c.req.method} ${c.req.path}; GET /openapi.json lists the routes.` }, 404),
  );
  route(app, metricsRoute, async (c) => {
    // Counts of everyone's work: not for a user's key that sees only its own (an operator's key reads them).
    if (await visibleUsers(c)) {
      throw new HttpError(
        403,
        "/metrics counts every user's work: it takes a service token or an operator's key",
        {
          required_roles: ['admin'],
        },
      );
    }
    return c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType });
  });
}

/** A zod schema as plain JSON Schema (no `$schema` key), for tool parameters. */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' });
  return rest;
}
