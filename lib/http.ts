import { randomUUID } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { routePath } from 'hono/route';
import { z } from 'zod';
import { HttpError } from './http-error.ts';
import { describeIssues } from './issues.ts';
import { JsonInputError, parseJson } from './json.ts';
import type { Logger } from './log.ts';
import { createMetrics, type Metrics, metricsRoute } from './metrics.ts';
import { incomingOf } from './node-request.ts';
import { REQUEST_ID_HEADER, requestIdFrom, withRequestId } from './request-id.ts';
import { type Role, requireRole, type Security, securityMiddleware } from './security.ts';

export { HttpError };

/** A route as a service's contract.ts declares it: the single source for validation and /openapi.json. */
export interface RouteSpec {
  method: 'get' | 'post' | 'put' | 'delete';
  /** OpenAPI style, e.g. `/tools/{name}`. */
  path: string;
  summary: string;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  responses: Record<number, z.ZodType>;
  /** Who may call it when the service has tokens; absent: any holder of one of the service's tokens. */
  roles?: readonly Role[];
  /** The media type of the 200 answer when it is not JSON (e.g. `text/plain` for /metrics). */
  produces?: string;
}

type Part<S, K extends string> = S extends Record<K, infer T extends z.ZodType> ? z.output<T> : undefined;

/** What a handler receives: the request's parts, already parsed by the contract's schemas. */
export interface RouteInput<S extends RouteSpec> {
  params: Part<S, 'params'>;
  query: Part<S, 'query'>;
  body: Part<S, 'body'>;
}

function parseWith<T extends z.ZodType>(schema: T, value: unknown, where: string): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new HttpError(400, `Invalid ${where}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * A request's body as text. Served by Node, it is read straight from the socket's stream: building the WHATWG
 * Request and its ReadableStream was the largest share of a service-to-service call's server side. The size
 * limit applies as it is read (a body without Content-Length); installBase() has checked a declared one.
 */
async function bodyText(c: Context): Promise<string> {
  const incoming = incomingOf(c);
  if (!incoming || incoming.readableEnded || incoming.readableDidRead) return c.req.text();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of incoming as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, `Request body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString('utf8');
}

async function readJsonBody(c: Context): Promise<unknown> {
  const text = await bodyText(c);
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
      body: spec.body ? parseWith(spec.body, await readJsonBody(c), 'request body') : undefined,
    } as RouteInput<S>;
    return handler(c, input);
  });
}

/** The largest request body any service reads (a whole file for write_file fits). */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** The response header naming the service that answered (agent-server, mcp-gateway, tool-server). */
export const SERVICE_HEADER = 'x-toolshift-service';

/** What installBase() may be given; a service passes its own metrics to add its series to the same registry. */
export interface BaseOptions {
  metrics?: Metrics;
  /** The service's own refusals as HTTP errors (the gateway's rules know no HTTP); others go on as they are. */
  asHttpError?: (err: unknown) => HttpError | undefined;
}

/**
 * What every service's app starts with, on every route: a request id (taken from `x-request-id` or made,
 * echoed back, carried on every log line and to the next service), an access line at debug and HTTP metrics,
 * the request checks of lib/security.ts (Host, Origin, Content-Type, tokens), a body size limit, JSON error
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
        { method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(seconds * 1000) },
        'request',
      ),
    );
  });
  for (const middleware of securityMiddleware(security)) app.use('*', middleware);
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
  route(app, metricsRoute, async (c) =>
    c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }),
  );
}

/** A zod schema as plain JSON Schema (no `$schema` key), for OpenAPI documents and tool parameters. */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' });
  return rest;
}

/** Builds an OpenAPI 3.1 document from a service's contract routes. */
function openApiDocument(title: string, specs: readonly RouteSpec[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of specs) {
    const parameters = [...paramList(spec.params, 'path'), ...paramList(spec.query, 'query')];
    const responses = Object.fromEntries(
      Object.entries(spec.responses).map(([status, schema]) => [
        status,
        {
          description: status.startsWith('2') ? 'OK' : 'Error',
          content: {
            [status === '200' && spec.produces ? spec.produces : 'application/json']: {
              schema: jsonSchema(schema, 'output'),
            },
          },
        },
      ]),
    );
    paths[spec.path] ??= {};
    paths[spec.path][spec.method] = {
      summary: spec.summary,
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(spec.body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } },
            },
          }
        : {}),
      responses,
    };
  }
  return { openapi: '3.1.0', info: { title, version: '0.1.0' }, paths };
}

function paramList(schema: z.ZodType | undefined, where: 'path' | 'query') {
  if (!schema) return [];
  const js = jsonSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(js.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || (js.required ?? []).includes(name),
    schema: s,
  }));
}

/**
 * Serves `GET /openapi.json` for the given routes. A service's contract lists GET /metrics too (as
 * lib/metrics.ts's `metricsRoute` does), though installBase() is what serves it.
 */
export function serveOpenApi(app: Hono, title: string, specs: readonly RouteSpec[]): void {
  const doc = openApiDocument(title, specs);
  app.get('/openapi.json', (c) => c.json(doc));
}
