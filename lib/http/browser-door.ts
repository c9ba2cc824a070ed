import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Context, MiddlewareHandler } from 'hono';
import { HttpError } from './http-error.ts';
import { incomingOf } from './node-request.ts';

// The browser door, the first of the request checks (security.ts installs it): a body must be JSON, the Host
// must be loopback, the listen address or allowed, and an Origin must be loopback or allowed, so neither a
// web page nor DNS rebinding reaches a service.

/** What the door needs of a service's Security. */
export interface DoorPolicy {
  allowedHosts: string[];
  allowedOrigins: string[];
  listenHost: string;
  /**
   * Paths another site may send a browser to (a top-level GET navigation): the console's return from the
   * identity provider, which carries its own proof (the flow's cookie and the provider's code).
   */
  landings?: ReadonlySet<string>;
}

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** True for loopback names and addresses: localhost, 127.0.0.0/8, ::1 and its IPv4-mapped form. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^(0:){5}ffff:127\./.test(h) || h.startsWith('::ffff:127.');
  return false;
}

/** True for a wildcard bind (every interface). */
function isWildcard(host: string): boolean {
  return ['', '0.0.0.0', '::', '[::]'].includes(host);
}

/** The host part of a Host header: `[::1]:8080` → `::1`, `Example.org:80` → `example.org`. */
function hostName(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') === -1 ? undefined : h.indexOf(']'));
  const colon = h.indexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

/** The addresses of this machine's interfaces, for a service bound to every interface. */
function localAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .flatMap((i) => (i ? [i.address.toLowerCase()] : []));
}

/** A refusal of the browser door: 403 with a reason, nothing executed. */
function refuse(status: 403 | 415, message: string): never {
  throw new HttpError(status, message);
}

/** The Host/Origin/Content-Type checks. */
export function browserDoor(security: DoorPolicy): MiddlewareHandler {
  const extraHosts = new Set(security.allowedHosts.map((h) => hostName(h)));
  const listen = security.listenHost.toLowerCase().replace(/^\[|\]$/g, '');
  const listenAddresses = new Set(isWildcard(listen) ? localAddresses() : [listen]);
  const extraOrigins = originSet(security);
  return async (c, next) => {
    const hostHeader = c.req.header('host') ?? new URL(c.req.url).host;
    const host = hostName(hostHeader);
    if (!isLoopbackHost(host) && !listenAddresses.has(host) && !extraHosts.has(host)) {
      refuse(
        403,
        `Host ${JSON.stringify(hostHeader)} is not allowed: this service answers loopback names and addresses, ` +
          'the address it listens on, and the names in ALLOWED_HOSTS',
      );
    }
    const origin = c.req.header('origin');
    if (origin !== undefined && !originAllowed(origin, extraOrigins)) {
      refuse(
        403,
        `Origin ${JSON.stringify(origin)} is not allowed: only loopback origins and those in ALLOWED_ORIGINS may call this service`,
      );
    }
    // A browser marks cross-site requests even when it leaves Origin out (some GETs): refuse those too.
    const landing =
      c.req.method === 'GET' &&
      c.req.header('sec-fetch-mode') === 'navigate' &&
      security.landings?.has(c.req.path) === true;
    if (origin === undefined && c.req.header('sec-fetch-site') === 'cross-site' && !landing) {
      refuse(403, 'Cross-site requests are not allowed');
    }
    if (UNSAFE_METHODS.has(c.req.method) && hasBody(c)) {
      const type = (c.req.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
      if (type !== 'application/json') {
        refuse(
          415,
          `A request body must be sent as Content-Type: application/json (got ${type === '' ? 'none' : JSON.stringify(type)})`,
        );
      }
    }
    await next();
  };
}

/**
 * Whether a request carries a body that must be JSON. Over HTTP/1.1 a body needs Content-Length or
 * Transfer-Encoding, so a POST or DELETE with neither has none (`curl -X POST …/reload`, an MCP client's
 * `DELETE /mcp`) and needs no Content-Type; any Content-Type that is sent must still be JSON.
 */
function hasBody(c: Context): boolean {
  if (c.req.header('content-type') !== undefined) return true;
  const length = c.req.header('content-length');
  if (length !== undefined) return Number(length) > 0;
  if (c.req.header('transfer-encoding') !== undefined) return true;
  // In-process requests (app.request) carry no framing headers: judge by the body itself.
  return incomingOf(c) === undefined && c.req.raw.body !== null;
}

export function originSet(security: DoorPolicy): Set<string> {
  return new Set(security.allowedOrigins.map((o) => o.toLowerCase().replace(/\/$/, '')));
}

export function originAllowed(origin: string, extra: Set<string>): boolean {
  const o = origin.toLowerCase().replace(/\/$/, '');
  if (extra.has(o)) return true;
  let url: URL;
  try {
    url = new URL(o);
  } catch {
    return false; // "null" (sandboxed frames, file://) and anything unparsable
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHost(url.hostname);
}
