import type { Hono } from 'hono';
import { z } from 'zod';
import { installedVersion } from '../config/installation.ts';
import { ErrorBody, type EventStream, jsonSchema, type RouteSpec } from './http.ts';
import { SERVICE_CREDENTIALS, type ServiceName } from './security.ts';

// A service's /openapi.json (OpenAPI 3.1), generated from its contract: each route's key is its operationId;
// the contract module's exported schemas, and each route's request and response bodies, are named component
// schemas; each role whose token the service accepts is a security scheme; the statuses a route can answer are
// its own (the contract's) and those the request checks every route goes through give (lib/http/http.ts
// installBase, lib/http/security.ts, lib/http/flood.ts); an event stream is described event by event.
// tests/lib/openapi.test.ts lints the documents with Redocly's recommended rules.

type Json = Record<string, unknown>;

/** What a service's description is made from. */
export interface ApiDescription {
  service: ServiceName;
  /** The routes, by key: the key is the operationId. */
  routes: Record<string, RouteSpec>;
  /** The contract module's exports: every zod schema among them becomes a component named as exported. */
  schemas: Record<string, unknown>;
  /** What the service is, for the document's description. */
  about: string;
}

/** `executeTask` → `ExecuteTask`, `task_started` → `TaskStarted`. */
const pascal = (key: string) =>
  key
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('');
const ref = (name: string, kind = 'schemas') => ({ $ref: `#/components/${kind}/${name}` });

/** The answers of the request checks, shared by every document (`components.responses`). */
const SHARED_RESPONSES: Record<string, { status: number; description: string; headers?: Json }> = {
  BadRequest: {
    status: 400,
    description:
      'The path, query or body failed the contract’s checks (or the body is not JSON); `error` names the field ' +
      'and what is valid',
  },
  Unauthorized: {
    status: 401,
    description:
      'No token, or a token the service does not accept (when the service has tokens); `error` names the ' +
      'variable whose value to send',
    headers: {
      'WWW-Authenticate': {
        description: 'A Bearer challenge (RFC 6750), without resource metadata: there is no OAuth',
        schema: { type: 'string' },
      },
    },
  },
  Forbidden: {
    status: 403,
    description:
      'The request checks refused it: a Host that is not loopback, the listen address or in ALLOWED_HOSTS; an ' +
      'Origin that is not loopback or in ALLOWED_ORIGINS; a cross-site browser request; or a token whose role ' +
      'may not call this route (`required_roles` lists those that may)',
  },
  PayloadTooLarge: { status: 413, description: 'The body is larger than 16 MiB' },
  UnsupportedMediaType: {
    status: 415,
    description: 'A body that is not sent as Content-Type: application/json',
  },
  TooManyStreams: {
    status: 429,
    description:
      'Too many event streams open (MAX_SSE_STREAMS, or MAX_SSE_STREAMS_PER_CREDENTIAL for this token); close one',
    headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
  },
  InternalError: {
    status: 500,
    description: 'An unexpected failure; `error` carries the id under which the service logged it',
  },
  Unavailable: {
    status: 503,
    description: 'Too many open connections (MAX_CONNECTIONS); the connection is closed, retry shortly',
    headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
  },
};

/** The shared answers a route can give, by status: what installBase() and the request checks do to it. */
function sharedStatuses(spec: RouteSpec, anonymous: boolean): Record<number, string> {
  const out: Record<number, string> = { 403: 'Forbidden', 500: 'InternalError', 503: 'Unavailable' };
  if (spec.params || spec.query || spec.headers || spec.body) out[400] = 'BadRequest';
  if (!anonymous) out[401] = 'Unauthorized';
  if (spec.body) out[413] = 'PayloadTooLarge';
  if (spec.method !== 'get') out[415] = 'UnsupportedMediaType';
  if (spec.stream) out[429] = 'TooManyStreams';
  return out;
}

/** One SSE message of `stream` per event name: `event`, `id` and `data` (JSON of the event's schema). */
function streamSchema(stream: EventStream, componentOf: (schema: z.ZodType, name: string) => Json): Json {
  const messages = Object.entries(stream.events).map(([event, schema]) => ({
    type: 'object',
    title: event,
    properties: {
      event: { const: event },
      id: { type: 'string', description: stream.idDescription },
      data: {
        type: 'string',
        contentMediaType: 'application/json',
        contentSchema: componentOf(schema, `${pascal(event)}Event`),
      },
    },
    required: ['event', 'data'],
  }));
  return {
    type: 'array',
    description: `${stream.description} Lines starting with \`:\` are comments that keep an idle stream open.`,
    items: messages.length === 1 ? messages[0] : { oneOf: messages },
  };
}

/** Turns a registry of named zod schemas into components: no `$schema`/`$id`, references between them. */
function components(
  registry: z.core.$ZodRegistry<{ id: string }>,
  io: 'input' | 'output',
): Record<string, Json> {
  const { schemas } = z.toJSONSchema(registry, {
    io,
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Json> };
  return Object.fromEntries(
    Object.entries(schemas).map(([name, { $schema: _s, $id: _i, ...rest }]) => [name, rest]),
  );
}

/** A schema worth a name: an object, array or union (a bare string or number stays inline). */
const worthNaming = (schema: z.ZodType) =>
  !(schema instanceof z.ZodString || schema instanceof z.ZodNumber || schema instanceof z.ZodBoolean);

/** Drops the components nothing refers to (a contract exports more than one service's routes use). */
function pruneUnused(doc: Json, schemas: Record<string, Json>): Record<string, Json> {
  const used = new Set<string>();
  const visit = (value: unknown) => {
    if (Array.isArray(value)) return value.forEach(visit);
    if (!value || typeof value !== 'object') return;
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')) {
        const name = v.slice('#/components/schemas/'.length);
        if (!used.has(name)) {
          used.add(name);
          visit(schemas[name]);
        }
      } else visit(v);
    }
  };
  visit(doc);
  return Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
}

/** The OpenAPI 3.1 document of a service. */
export function openApiDocument(api: ApiDescription): Json {
  const named = namedSchemas(api);
  const credentials = SERVICE_CREDENTIALS[api.service];
  const everyRole = credentials.map((c) => ({ [c.role]: [] }));
  const paths: Record<string, Record<string, Json>> = {};
  for (const [key, spec] of Object.entries(api.routes)) {
    paths[spec.path] ??= {};
    paths[spec.path][spec.method] = operation(key, spec, named, everyRole);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: `toolshift ${api.service}`,
      version: installedVersion(),
      description:
        `${api.about}\n\nEvery route but GET /health needs \`Authorization: Bearer <token>\` when the service has ` +
        'tokens (they are optional on a loopback-only setup); the security schemes name the variable holding ' +
        'each role’s token. Every answer but an event stream is JSON; errors are `{"error": "…"}`.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/', description: 'The service this document was fetched from' }],
    tags: [...new Set(Object.values(api.routes).map((r) => tagOf(r.path)))].map((name) => ({
      name,
      description: TAGS[name],
    })),
    paths,
    components: documentComponents(paths, named, credentials),
  };
}

/**
 * The component schemas of one document: the contract's named exports, and each route's bodies as the
 * operations ask for them (`output`: a response body; `input`: a request body).
 */
function namedSchemas(api: ApiDescription) {
  const outputs = z.registry<{ id: string }>();
  const inputs = z.registry<{ id: string }>();
  const names = new Map<z.ZodType, string>([[ErrorBody, 'ErrorBody']]);
  outputs.add(ErrorBody, { id: 'ErrorBody' });
  for (const [name, value] of Object.entries(api.schemas)) {
    if (value instanceof z.ZodType && worthNaming(value) && !names.has(value)) {
      names.set(value, name);
      outputs.add(value, { id: name });
    }
  }
  /** A response body: its component (named when the contract named it, else after the route), or inline. */
  const output = (schema: z.ZodType, fallback: string): Json => {
    if (!worthNaming(schema)) return jsonSchema(schema, 'output');
    if (!names.has(schema)) {
      names.set(schema, fallback);
      outputs.add(schema, { id: fallback });
    }
    return ref(names.get(schema) as string);
  };
  /** A request body: a component named after the route (its input form: defaults are optional there). */
  const input = (schema: z.ZodType, name: string): Json => {
    if (!inputs.has(schema)) inputs.add(schema, { id: name });
    return ref((inputs.get(schema) as { id: string }).id);
  };
  return { outputs, inputs, output, input };
}

type NamedSchemas = ReturnType<typeof namedSchemas>;

/** One route's operation: who may call it, its parameters, its body and every answer it can give. */
function operation(key: string, spec: RouteSpec, named: NamedSchemas, everyRole: Json[]): Json {
  const anonymous = spec.path === '/health';
  const responses = routeResponses(key, spec, sharedStatuses(spec, anonymous), named.output);
  const parameters = [
    ...paramList(spec.params, 'path'),
    ...paramList(spec.query, 'query'),
    ...paramList(spec.headers, 'header'),
  ];
  return {
    operationId: key,
    summary: spec.summary,
    tags: [tagOf(spec.path)],
    security: anonymous
      ? [{}, ...everyRole]
      : spec.roles
        ? spec.roles.map((role) => ({ [role]: [] }))
        : everyRole,
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(spec.body
      ? {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: named.input(spec.body, `${pascal(key)}Request`) } },
          },
        }
      : {}),
    responses,
  };
}

/** A route's answers by status, in order: its own (the contract's), then the shared ones it can give. */
function routeResponses(
  key: string,
  spec: RouteSpec,
  statuses: Record<number, string>,
  output: NamedSchemas['output'],
): Json {
  const responses: Record<string, Json> = {};
  for (const [status, schema] of Object.entries(spec.responses)) {
    const name = status === '200' ? `${pascal(key)}Response` : `${pascal(key)}Response${status}`;
    const content: Json = {};
    if (status === '200' && spec.produces === 'text/event-stream' && spec.stream) {
      content['text/event-stream'] = { schema: streamSchema(spec.stream, output) };
    } else {
      content[status === '200' && spec.produces ? spec.produces : 'application/json'] = {
        schema: output(schema, name),
      };
      if (status === '200' && spec.stream)
        content['text/event-stream'] = { schema: streamSchema(spec.stream, output) };
    }
    const shared = statuses[Number(status)];
    responses[status] = {
      description: shared
        ? `${STATUS_TEXT[Number(status)]}. Or: ${SHARED_RESPONSES[shared].description}`
        : STATUS_TEXT[Number(status)],
      content,
    };
  }
  for (const [status, name] of Object.entries(statuses))
    if (!(status in responses)) responses[status] = ref(name, 'responses');
  return Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
}

/** `components`: the schemas and shared answers the paths use, and a security scheme per role. */
function documentComponents(
  paths: Json,
  named: NamedSchemas,
  credentials: (typeof SERVICE_CREDENTIALS)[ServiceName],
): Json {
  const schemas = { ...components(named.outputs, 'output'), ...components(named.inputs, 'input') };
  const responses = Object.fromEntries(
    Object.entries(SHARED_RESPONSES).map(([name, r]) => [
      name,
      {
        description: r.description,
        ...(r.headers ? { headers: r.headers } : {}),
        content: { 'application/json': { schema: ref('ErrorBody') } },
      },
    ]),
  );
  const used = JSON.stringify(paths);
  return {
    schemas: pruneUnused({ paths, responses }, schemas),
    responses: Object.fromEntries(
      Object.entries(responses).filter(([n]) => used.includes(`/responses/${n}"`)),
    ),
    securitySchemes: Object.fromEntries(
      credentials.map((c) => [
        c.role,
        {
          type: 'http',
          scheme: 'bearer',
          description: `The value of ${c.variable}: ${c.who}`,
        },
      ]),
    ),
  };
}

/** What a route's own answers mean, by status (the shared ones are described in SHARED_RESPONSES). */
const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created; `Location` names it',
  202: 'Accepted: the work goes on; the body says where to follow it',
  400: 'Refused as invalid; `error` says what was wrong and what is valid',
  401: 'The credential was refused',
  403: 'Refused by the rules (disabled, inactive, denied by policy, or not this role’s to do); `error` says which',
  404: 'Not found; `error` says where to list what exists',
  405: 'Not a method this path takes in this protocol era',
  409: 'Conflicts with the current state (already decided, waiting for approval, over budget); `error` says what',
  429: 'Refused by a limit (calls per minute, activations per task); `error` says when to retry',
  502: 'A service or upstream server behind this one failed; `error` says which and why',
  503: 'Not available now; `error` says why',
  504: 'A service behind this one did not answer in time',
};

/** The tag of a route, from its path. */
function tagOf(path: string): string {
  if (path === '/health' || path === '/metrics') return 'service';
  if (path.includes('/approvals')) return 'approvals';
  for (const tag of ['policy', 'audit', 'prompts'] as const) if (path.includes(`/${tag}`)) return tag;
  if (/\/tools(\/|$)/.test(path)) return 'tools';
  if (/toolsets|defaults|reload/.test(path)) return path.startsWith('/mcp/toolsets/') ? 'mcp' : 'toolsets';
  if (path.startsWith('/agent/')) return 'tasks';
  return 'mcp';
}

/** What each tag groups. */
const TAGS: Record<string, string> = {
  tasks: 'Run tasks, follow their events, cancel them',
  approvals: 'Tool calls and activations waiting for a human yes',
  toolsets: 'Which toolsets a session (or the deployment) has',
  tools: 'The tools of a session’s active toolsets, and calling them',
  policy: 'The operator’s ceiling: allow, ask and deny rules',
  audit: 'What was done, by whom',
  prompts: 'Playbooks: named goals with arguments',
  mcp: 'The MCP face (Streamable HTTP and the 2024-11-05 HTTP+SSE transport)',
  service: 'Health and metrics',
};

function paramList(schema: z.ZodType | undefined, where: 'path' | 'query' | 'header') {
  if (!schema) return [];
  const js = jsonSchema(schema, 'input') as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(js.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || (js.required ?? []).includes(name),
    ...(typeof s.description === 'string' ? { description: s.description } : {}),
    schema: s,
  }));
}

/** Serves `GET /openapi.json`, made once. */
export function serveOpenApi(app: Hono, api: ApiDescription): void {
  const doc = openApiDocument(api);
  app.get('/openapi.json', (c) => c.json(doc));
}
