import { z } from 'zod';

// The base every service's contract is written on (scripts/check-boundaries.ts counts it as a contract: it
// imports only zod): what a route is, what an event stream carries, the body of every error. lib/http/http.ts
// serves routes from it, lib/http/openapi.ts describes them.

/**
 * Who may call a route: the operator, the agent-server, the gateway (as the tool-server's client), a user of
 * the agent-server's API, an MCP client of the gateway's MCP face, a user deciding an approval, and a viewer
 * (reads everything, changes nothing: the console's read-only login).
 */
export type Role = 'admin' | 'agent' | 'gateway' | 'user' | 'mcp' | 'approver' | 'viewer';

/** A route as a service's contract.ts declares it: the single source for validation and /openapi.json. */
export interface RouteSpec {
  method: 'get' | 'post' | 'put' | 'delete';
  /** OpenAPI style, e.g. `/tools/{name}`. */
  path: string;
  summary: string;
  params?: z.ZodType;
  query?: z.ZodType;
  /** Request headers the route reads (names in lower case). */
  headers?: z.ZodType;
  body?: z.ZodType;
  responses: Record<number, z.ZodType>;
  /** Who may call it when the service has tokens; absent: any holder of one of the service's tokens. */
  roles?: readonly Role[];
  /** The media type of the 200 answer when it is not JSON (e.g. `text/plain` for /metrics). */
  produces?: string;
  /** The event stream the route answers with (always, when `produces` is text/event-stream; else when asked). */
  stream?: EventStream;
}

/** A Server-Sent Events stream as a contract declares it: each event name and the JSON its `data` carries. */
export interface EventStream {
  description: string;
  /** What an event's SSE `id` is (for Last-Event-ID). */
  idDescription: string;
  events: Record<string, z.ZodType>;
}

/** The body of every 4xx and 5xx answer: a sentence saying what was wrong and what is valid (and details). */
export const ErrorBody = z.looseObject({ error: z.string() });

/** A service's database in /health: reachable, or unreachable since when and why (lib/db/reachability.ts). */
export const DatabaseHealth = z.object({
  state: z.enum(['ok', 'unreachable']),
  since: z.string().optional(),
  error: z.string().optional(),
});
