import { timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import type { Config } from '../config/config.ts';
import { type KeyService, serviceRoles } from '../identity/keys.ts';
import type { LimitName } from '../identity/limits.ts';
import type { IdentityStore, KeyHolder } from '../identity/store.ts';
import { browserDoor, isLoopbackHost, originAllowed, originSet } from './browser-door.ts';
import { type ConsoleDoor, type ConsoleLogin, consoleEntry } from './console-door.ts';
import type { Role } from './contract.ts';
import { DEFAULT_FLOOD_LIMITS, type FloodLimits, limitStreams } from './flood.ts';
import { HttpError } from './http-error.ts';
import {
  accessTokenEntry,
  isOAuthPath,
  looksLikeJwt,
  type McpOAuth,
  mcpOAuth,
  resourceMetadata,
  unauthorized,
} from './oauth-resource.ts';
import { digest, expectedDigest } from './token-match.ts';

export type { ConsoleDoor, ConsoleLogin } from './console-door.ts';
export { tokenMatches } from './token-match.ts';
export { isLoopbackHost };

// The request checks every route of every service goes through, installed once by installBase(): the
// browser door (Content-Type, Host, Origin) and bearer tokens. A route cannot opt out: the middleware is
// on '*', and the only routes without a token are GET /health and the gateway's OAuth metadata. Only the
// gateway's MCP endpoint may be an OAuth protected resource (oauth-resource.ts, MCP_OAUTH_RESOURCE); otherwise a
// service says it has no OAuth to an OAuth-capable client (404 on the discovery paths, a plain Bearer challenge).

export type { Role };

/** A credential a service accepts: its role, its value, and the variable that holds it (for messages). */
export interface TokenSpec {
  role: Role;
  token: string;
  variable: string;
}

/** A service's request policy; build it with securityFor() in each service's server.ts. */
export interface Security {
  /** The tokens this service accepts; when empty, routes need none (a loopback-only setup). */
  tokens: TokenSpec[];
  /** Host names (or addresses) a request's Host may carry besides loopback and the listen address. */
  allowedHosts: string[];
  /** Origins (scheme://host[:port]) a browser request may come from besides loopback origins. */
  allowedOrigins: string[];
  /** The address the service listens on (HOST). */
  listenHost: string;
  /** Paths another site may send a browser to (lib/http/browser-door.ts). */
  landings?: ReadonlySet<string>;
  /** Connection and event-stream caps, header and body timeouts (lib/http/flood.ts); defaults when absent. */
  limits?: FloodLimits;
  /** The web console's logins (the agent-server only): a session cookie as a second way in. */
  console?: ConsoleDoor;
  /** Users' API keys (lib/identity), accepted beside the service's tokens; the service they are presented to. */
  identity?: { store: IdentityStore; service: KeyService };
  /** The gateway's /mcp as an OAuth protected resource: access tokens of the operator's authorization server. */
  oauth?: McpOAuth;
}

/**
 * Who a request was authenticated as; `local` when the service has no tokens. `credential` is a digest of
 * the token (never the token), for binding state such as an MCP session handle to the credential. A user's key
 * stands for several roles (`roles`, the first is `role`) and names its holder (`user`).
 */
export type Principal =
  | { role: Role; variable: string; credential: string; roles?: readonly Role[]; user?: KeyHolder }
  | { role: 'local' };

declare module 'hono' {
  interface ContextVariableMap {
    principal: Principal;
    /** Set when the request came with a user's key: where that user's limits are counted. */
    identity: IdentityStore;
    /** Set when the request came with a console session cookie. */
    consoleLogin: ConsoleLogin;
  }
}

/** The gateway's MCP face: `/mcp` and its fixed views `/mcp/toolsets/<ids>` (the REST routes are elsewhere). */
function isMcpFacePath(path: string): boolean {
  return path === '/mcp' || path.startsWith('/mcp/toolsets/');
}

/** `A`, `A or B`: the variables of some tokens, for messages. */
const variablesOf = (tokens: readonly TokenSpec[]) =>
  [...new Set(tokens.map((t) => t.variable))].join(' or ');

/**
 * The variable a client of `path` should send. The MCP face takes GATEWAY_MCP_TOKEN (the operator's token
 * too, but a client is given the MCP one; without it, the operator's is the only one); elsewhere, every
 * token the service accepts.
 */
function variableFor(security: Security, path: string): string {
  const mcp = security.tokens.filter((t) => t.role === 'mcp');
  const admin = security.tokens.filter((t) => t.role === 'admin');
  if ((isMcpFacePath(path) || isOAuthPath(path)) && (mcp.length > 0 || admin.length > 0))
    return variablesOf(mcp.length > 0 ? mcp : admin);
  return variablesOf(security.tokens);
}

/**
 * The answer to an OAuth discovery or endpoint path, to everyone, token or not: 404, as a server without
 * OAuth gives, so a client concludes there is none. The body is an OAuth error too (`error_description`):
 * a client that goes on to register at /register shows it, and it says which token to send instead.
 */
function noOAuth(security: Security, path: string): never {
  const how =
    security.tokens.length === 0
      ? 'this service needs no token'
      : `send Authorization: Bearer <token> with the value of ${variableFor(security, path)} (a header in the client's configuration)`;
  const message = security.oauth
    ? `This service is not an authorization server: sign in with ${security.oauth.issuer} (as /.well-known/oauth-protected-resource says), or ${how}.`
    : `This service does not use OAuth (there is no authorization server to sign in with); ${how}.`;
  throw new HttpError(404, message, { error_description: message });
}

/** Bearer-token authentication on every route but GET /health; sets `principal` for route role checks. */
function authenticate(security: Security): MiddlewareHandler {
  return async (c, next) => {
    if (isOAuthPath(c.req.path)) {
      const metadata = security.oauth && resourceMetadata(security.oauth, c.req.path);
      return metadata ? c.json(metadata) : noOAuth(security, c.req.path);
    }
    if (security.tokens.length === 0) {
      c.set('principal', { role: 'local' });
      return next();
    }
    const header = c.req.header('authorization') ?? '';
    if (header === '' && security.console && (await consoleEntry(c, security.console))) return next();
    const presented = /^Bearer\s+(.+)$/i.exec(header)?.[1]?.trim();
    if (presented !== undefined && security.identity && (await userKey(c, security.identity, presented))) {
      return next();
    }
    // Hashed once, compared against every token so the time taken does not say which role exists.
    const given = presented === undefined ? undefined : digest(presented);
    const matches = security.tokens.filter(
      (t) => given !== undefined && timingSafeEqual(given, expectedDigest(t.token)),
    );
    // GET /health answers anyone, but says more only to a caller with a token (see healthDetail).
    if (c.req.method === 'GET' && c.req.path === '/health' && matches.length === 0) return next();
    if (matches.length === 0) {
      const onFace = isMcpFacePath(c.req.path);
      if (onFace && presented && security.oauth && security.identity && looksLikeJwt(presented)) {
        await accessTokenEntry(c, security.oauth, security.identity.store, presented);
        return next();
      }
      unauthorized({ oauth: security.oauth, onFace, variable: variableFor(security, c.req.path), presented });
    }
    const credential = expectedDigest(matches[0].token).toString('base64url');
    c.set('principal', { role: matches[0].role, variable: matches[0].variable, credential });
    await next();
  };
}

/**
 * A user's key (lib/identity): sets the principal and says true; a key refused (unknown, revoked, expired, its
 * user removed) is a 401 saying which; false when `presented` is not shaped as a key (a service token).
 */
async function userKey(
  c: Context,
  identity: NonNullable<Security['identity']>,
  presented: string,
): Promise<boolean> {
  const check = await identity.store.checkKey(presented);
  if (check === undefined) return false;
  if ('refused' in check) {
    throw new HttpError(
      401,
      check.refused,
      {},
      { 'WWW-Authenticate': 'Bearer realm="toolshift", error="invalid_token"' },
    );
  }
  const { holder } = check;
  c.set('identity', identity.store);
  const roles = serviceRoles(identity.service, holder.role);
  c.set('principal', {
    role: roles[0],
    roles,
    variable: `key ${holder.keyId} (${holder.role}) of user ${holder.user.name}`,
    credential: `key:${holder.keyId}`,
    user: holder,
  });
  return true;
}

/**
 * Whether /health may show its details (upstream states and reasons, pids, stderr lines): to a caller with one
 * of the service's tokens, or on a service that has none. Without a token /health says only whether it is up.
 */
export function healthDetail(c: Context): boolean {
  const principal = c.get('principal');
  // A user's key (not an operator's) reads whether the service is up, not its upstreams' stderr.
  if (principal && 'user' in principal && principal.user && principal.user.role !== 'operator') return false;
  return principal !== undefined;
}

/**
 * Who a request acts as for what it owns (a thread): the digest of the token behind it, a bearer token's or the
 * one a console login was made with, so a user's API calls and console login own the same things. The operator
 * (a console login made with the operator's token, or a service without tokens) sees everyone's.
 */
export function callerOf(c: Context): { owner: string; all: boolean } {
  const login = c.get('consoleLogin');
  if (login?.user) return { owner: `user:${login.user.user.id}`, all: login.user.role === 'operator' };
  if (login) {
    return { owner: digest(login.token).toString('base64url'), all: login.consoleRole === 'admin' };
  }
  const principal = c.get('principal');
  if (!principal || principal.role === 'local') return { owner: 'local', all: true };
  if (principal.user)
    return { owner: `user:${principal.user.user.id}`, all: principal.user.role === 'operator' };
  return { owner: principal.credential, all: false };
}

/**
 * Counts one of `limit` against the limits of the user whose key made the request (theirs and their teams'):
 * past one, 429 with Retry-After naming the limit and whose it is. A request with a service token counts nothing.
 */
export async function chargeCaller(c: Context, limit: LimitName, amount = 1): Promise<() => Promise<void>> {
  const principal = c.get('principal');
  const user = principal && 'user' in principal ? principal.user : undefined;
  if (!user) return async () => {};
  const identity = c.get('identity');
  const at = Date.now();
  await identity.charge(user.subjects, limit, amount, at);
  // What gives it back, in the window it was counted in, should what it was for not happen.
  return () => identity.giveBack(user.subjects, limit, amount, at);
}

/** Refuses (429) a request of a user who spent all of `limit` in its window (model tokens, known after use). */
export async function refuseIfSpent(c: Context, limit: LimitName): Promise<void> {
  const principal = c.get('principal');
  const user = principal && 'user' in principal ? principal.user : undefined;
  if (user) await c.get('identity').refuseIfSpent(user.subjects, limit);
}

/**
 * Whose work a user's key may see and act on (owners as threads, approvals and audit rows record them,
 * `user:<id>`), by the key itself or a console login made with it: their own; an approver's also their
 * teammates'. Undefined for everyone's: an operator's key, a service token or a console login made with one (what
 * those see is decided as before).
 */
export async function visibleUsers(c: Context): Promise<readonly string[] | undefined> {
  const principal = c.get('principal');
  const holder = principal && 'user' in principal ? principal.user : undefined;
  if (!holder || holder.role === 'operator') return undefined;
  const own = `user:${holder.user.id}`;
  if (holder.role !== 'approver') return [own];
  const teammates = await c.get('identity').teammates(holder.user.id);
  return [own, ...teammates.map((id) => `user:${id}`)];
}

/** Refuses the request unless it was authenticated as one of `roles` (a service without tokens allows all). */
export function requireRole(c: Context, roles: readonly Role[], what: string): void {
  const principal = c.get('principal');
  if (!principal || principal.role === 'local') return;
  if ((principal.roles ?? [principal.role]).some((r) => roles.includes(r))) return;
  throw new HttpError(
    403,
    `${what} is not allowed with ${principal.variable}; it needs ${roles.join(' or ')} credentials`,
    { required_roles: roles },
  );
}

/** The middleware chain installBase() puts in front of every route. */
export function securityMiddleware(security: Security): MiddlewareHandler[] {
  const extraOrigins = originSet(security);
  // CORS headers only for allowed origins (loopback pages on another port, ALLOWED_ORIGINS).
  const corsHeaders = cors({
    // No Origin (every service-to-service call): nothing to allow, and no URL to fail parsing.
    origin: (origin) => (origin !== '' && originAllowed(origin, extraOrigins) ? origin : null),
    allowHeaders: [
      'content-type',
      'authorization',
      'last-event-id',
      'prefer',
      'x-request-id',
      'mcp-session-id',
      'mcp-protocol-version',
    ],
    exposeHeaders: ['mcp-session-id', 'x-request-id', 'location', 'retry-after', 'www-authenticate'],
    maxAge: 600,
  });
  return [
    browserDoor(security),
    // A request without Origin (every call between services, every CLI call) needs no CORS headers, only
    // `Vary: Origin`, set before the answer exists: hono's cors adds it afterwards, which makes the framework
    // rebuild the finished response as a full WHATWG Response, a third of a small call's cost.
    (c, next) => {
      if (c.req.method === 'OPTIONS' || c.req.header('origin') !== undefined) return corsHeaders(c, next);
      c.header('Vary', 'Origin');
      return next();
    },
    authenticate(security),
    limitStreams(security.limits ?? DEFAULT_FLOOD_LIMITS),
  ];
}

/**
 * Refuses to listen on a non-loopback address when the service's tokens are not all set, unless
 * TOOLSHIFT_INSECURE=1: on a public interface, anyone who can reach the port could otherwise use it.
 */
export function assertSafeBind(
  service: string,
  host: string,
  required: { variable: string; value: string | undefined }[],
  insecure: boolean,
): void {
  if (isLoopbackHost(host) || insecure) return;
  const missing = required.filter((r) => !r.value).map((r) => r.variable);
  if (missing.length === 0) return;
  throw new Error(
    `${service} refuses to listen on ${host}, which is not a loopback address, without ${missing.join(' and ')}: ` +
      'anyone who can reach the port could use it. Set the token(s) (and ALLOWED_HOSTS for the names clients use), ' +
      'bind HOST=127.0.0.1, or set TOOLSHIFT_INSECURE=1 to accept the risk.',
  );
}

/** Which service a policy is for. */
export type ServiceName = 'agent-server' | 'mcp-gateway' | 'tool-server';

/** A credential a service accepts: its role, the variable that holds it, and who is given it. */
export interface ServiceCredential {
  role: Role;
  variable: string;
  who: string;
}

/** The credentials each service accepts, by role: securityFor() takes their values from config, /openapi.json names them. */
export const SERVICE_CREDENTIALS: Record<ServiceName, readonly ServiceCredential[]> = {
  'agent-server': [
    { role: 'user', variable: 'AGENT_API_TOKEN', who: "users of the agent's API and the CLI" },
    { role: 'viewer', variable: 'VIEWER_TOKEN', who: 'read-only users (tasks, their events, approvals)' },
  ],
  'mcp-gateway': [
    { role: 'admin', variable: 'GATEWAY_ADMIN_TOKEN', who: 'the operator' },
    { role: 'agent', variable: 'GATEWAY_AGENT_TOKEN', who: 'the agent-server, as a client of the gateway' },
    { role: 'mcp', variable: 'GATEWAY_MCP_TOKEN', who: "MCP clients of the gateway's /mcp" },
    // A user of the agent's API may decide approvals (the agent-server relays the user's own token).
    { role: 'approver', variable: 'AGENT_API_TOKEN', who: "users of the agent's API, deciding approvals" },
    { role: 'viewer', variable: 'VIEWER_TOKEN', who: 'read-only users (toolsets, approvals, audit)' },
  ],
  'tool-server': [
    { role: 'gateway', variable: 'TOOL_SERVER_TOKEN', who: "the gateway, as the tool-server's only client" },
  ],
};

/**
 * A service's request policy from config: the tokens it accepts by role, and the allowed hosts and
 * origins. Refuses (throws) a public bind without the service's tokens, and two roles sharing a token.
 */
export function securityFor(config: Config, service: ServiceName): Security {
  const values: Record<string, string | undefined> = {
    AGENT_API_TOKEN: config.agent.apiToken,
    GATEWAY_ADMIN_TOKEN: config.gateway.adminToken,
    GATEWAY_AGENT_TOKEN: config.gateway.agentToken,
    GATEWAY_MCP_TOKEN: config.gateway.mcp.token,
    TOOL_SERVER_TOKEN: config.tools.token,
    VIEWER_TOKEN: config.console.viewerToken,
  };
  const candidates = SERVICE_CREDENTIALS[service].map((c) => ({ ...c, value: values[c.variable] }));
  // GATEWAY_MCP_TOKEN and the approver's token are optional on a public bind: without them the MCP face and
  // approvals are the operator's alone.
  assertSafeBind(
    service,
    config.host,
    candidates.filter((c) => c.role !== 'mcp' && c.role !== 'approver' && c.role !== 'viewer'),
    config.http.insecure,
  );
  const tokens = candidates.flatMap((c) =>
    c.value ? [{ role: c.role, token: c.value, variable: c.variable }] : [],
  );
  if (new Set(tokens.map((t) => t.token)).size !== tokens.length) {
    throw new Error(
      `${tokens.map((t) => t.variable).join(' and ')} must differ: each role needs its own token`,
    );
  }
  const mcp = service === 'mcp-gateway' ? config.gateway.mcp : { allowedHosts: [], allowedOrigins: [] };
  return {
    tokens,
    allowedHosts: [...config.http.allowedHosts, ...mcp.allowedHosts],
    allowedOrigins: [...config.http.allowedOrigins, ...mcp.allowedOrigins],
    listenHost: config.host,
    limits: config.http.limits,
    ...(service === 'mcp-gateway' && config.signIn.mcp
      ? { oauth: mcpOAuth(config.signIn.mcp, config.signIn.rule) }
      : {}),
  };
}
