import type { Context } from 'hono';
import { getCookie } from 'hono/cookie';
import type { IdentityStore, KeyHolder } from '../identity/store.ts';
import type { Role } from './contract.ts';
import { HttpError } from './http-error.ts';
import { tokenMatches } from './token-match.ts';

// The web console's way in (lib/http/security.ts installs it with the rest of the request checks): a session cookie
// as a second credential beside bearer tokens, its state changes only from the console's own origin with the
// login's CSRF token.

/** A console login behind a session cookie (agent-server/console/sessions.ts keeps them). */
export interface ConsoleLogin {
  /** The role this service's routes see (the operator's login acts as a user of the agent's API here). */
  role: Role;
  /** The role the login was made for: what the console lets it do (the gateway checks it again). */
  consoleRole: Role;
  /** A digest of the session (never its secret), as a bearer token's digest is for a token. */
  credential: string;
  /** The value every state-changing request of this login carries in `x-csrf-token`. */
  csrf: string;
  /** The token the login was made with, for the console's calls to the gateway on the user's behalf. */
  token: string;
  /**
   * Whether the login still holds (not logged out, expired, or ended by its credential's rotation), asked
   * again by what outlives its request's check: an event stream.
   */
  holds?: () => Promise<boolean>;
  /** Who logged in with their own key (lib/identity): they see their own work. */
  user?: KeyHolder;
}

/**
 * How a service takes console logins. Everything under `prefix` that changes state must come from the
 * console's own origin; a cookie authenticates any route, and a state-changing one only with its CSRF token.
 */
export interface ConsoleDoor {
  prefix: string;
  /** The cookie's name for a request (cookies ignore ports, so it names the port). */
  cookieOf(c: Context): string;
  /** The login a cookie's value opens, or undefined (unknown, expired, logged out). */
  resolve(secret: string): Promise<ConsoleLogin | undefined>;
  /** Routes open without a credential (the login page, the assets): `METHOD path`. */
  open: ReadonlySet<string>;
  /** Where a browser without a login asking for a console page is sent. */
  loginPath: string;
  /** Where the limits of a login made with a user's key are counted. */
  identity?: IdentityStore;
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Whether a browser request comes from the page's own origin: its Origin names exactly the Host it was sent
 * to (any loopback port is another site here: cookies and SameSite ignore ports), or, without Origin, the
 * browser says same-origin. A request with neither is not from a page (browsers send one of them).
 */
function sameOrigin(c: Context): boolean {
  const origin = c.req.header('origin');
  if (origin === undefined) return c.req.header('sec-fetch-site') === 'same-origin';
  return originIsHost(c, origin);
}

/** A page of another origin sent this (a program without Origin and Sec-Fetch-Site did not). */
function fromOtherPage(c: Context): boolean {
  const origin = c.req.header('origin');
  if (origin !== undefined) return !originIsHost(c, origin);
  const site = c.req.header('sec-fetch-site');
  return site !== undefined && site !== 'same-origin' && site !== 'none';
}

function originIsHost(c: Context, origin: string): boolean {
  try {
    const url = new URL(origin);
    return (
      (url.protocol === 'http:' || url.protocol === 'https:') &&
      url.host === (c.req.header('host') ?? '').toLowerCase()
    );
  } catch {
    return false;
  }
}

function refuseConsole(why: string): never {
  throw new HttpError(
    403,
    `${why}: a console request that changes something must come from the console's own page (same origin)` +
      ' and carry its CSRF token in x-csrf-token',
  );
}

/**
 * The console's way in, for a request without Authorization: its session cookie. Returns whether the request
 * may go on (a login, or a route open to all); throws for a cookie's state change without its proof.
 */
export async function consoleEntry(c: Context, door: ConsoleDoor): Promise<boolean> {
  const unsafe = UNSAFE.has(c.req.method);
  const inConsole = c.req.path === door.prefix || c.req.path.startsWith(`${door.prefix}/`);
  if (unsafe && inConsole && fromOtherPage(c)) refuseConsole('Cross-origin request refused');
  const secret = getCookie(c, door.cookieOf(c));
  const login = secret && secret.length <= 200 ? await door.resolve(secret) : undefined;
  if (login) {
    if (unsafe) {
      if (!sameOrigin(c)) refuseConsole('Cross-origin request refused');
      const csrf = c.req.header('x-csrf-token');
      if (csrf === undefined || !tokenMatches(csrf, login.csrf)) refuseConsole('Missing or wrong CSRF token');
    }
    c.set('principal', {
      role: login.role,
      variable: `a console login (${login.role})`,
      credential: login.credential,
      ...(login.user ? { user: login.user } : {}),
    });
    if (login.user && door.identity) c.set('identity', door.identity);
    const opened = secret as string;
    c.set('consoleLogin', { ...login, holds: async () => (await door.resolve(opened)) !== undefined });
    return true;
  }
  if (door.open.has(`${c.req.method} ${c.req.path}`)) return true;
  if (c.req.method === 'GET' && inConsole) {
    throw new HttpError(303, 'Log in to the console first', {}, { location: door.loginPath });
  }
  return false;
}
