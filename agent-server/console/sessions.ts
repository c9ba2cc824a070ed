import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { deleteCookie, setCookie } from 'hono/cookie';
import { callRoute, type ServiceEndpoint, ServiceError } from '../../lib/http/http-client.ts';
import { HttpError } from '../../lib/http/http-error.ts';
import {
  type ConsoleDoor,
  type ConsoleLogin,
  type Role,
  type Security,
  tokenMatches,
} from '../../lib/http/security.ts';
import { gatewayRoutes } from '../../mcp-gateway/contract.ts';
import type { TaskStore } from '../store/interface.ts';

// Console logins. A login exchanges a token (the agent's API token, the viewer's, or the operator's, which the
// gateway vouches for) for a random secret kept only in an HttpOnly, SameSite=Strict cookie. The store keeps
// the secret's hash, the role, and the token sealed (AES-256-GCM) under a key derived from the secret: the
// console calls the gateway on the user's behalf with it, and the database alone gives no token away. The
// CSRF token is derived from the secret too (HMAC), so it is never stored. A one-time login link carries a
// code kept the same way, taken (deleted) by its first use on any process sharing the store.
// A login lasts only as long as the token it was made with: every request checks the unsealed token against
// the one that role has now (this process's own, or the operator's as the gateway answers now), and a login
// whose token was changed is deleted, on whichever process sees it first.

export const CONSOLE_PREFIX = '/console';
export const LOGIN_PATH = '/console/login';
/** How long a printed login link works. */
export const LINK_MS = 10 * 60_000;

/** What the console's logins need. */
export interface LoginDeps {
  store: TaskStore;
  security: Security;
  /** The gateway, reached without credentials (each call carries the user's own). */
  gateway: ServiceEndpoint;
  /** How long a login lasts. */
  sessionMs: number;
}

const hashOf = (secret: string) => createHash('sha256').update(secret).digest('hex');
const keyOf = (secret: string) => Buffer.from(hkdfSync('sha256', secret, 'toolshift-console', 'seal', 32));

/** The token sealed under the secret: iv, ciphertext and tag, base64url. */
function seal(secret: string, token: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyOf(secret), iv);
  const body = Buffer.concat([cipher.update(token, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
}

function unseal(secret: string, sealed: string): string | undefined {
  const raw = Buffer.from(sealed, 'base64url');
  if (raw.length < 29) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyOf(secret), raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    return undefined;
  }
}

/** The roles a console login can have, as the console names them. */
export const ROLE_NAMES: Record<string, string> = {
  viewer: 'viewer',
  user: 'approver',
  admin: 'operator',
  local: 'operator',
};

/** The cookie's name: cookies ignore ports, so two consoles on one host name each keep their own. */
export function cookieName(c: Context): string {
  const port = /:(\d+)$/.exec(c.req.header('host') ?? '')?.[1] ?? '80';
  return `toolshift_console_${port}`;
}

/** The console's logins: the door lib/http/security.ts lets them in by, and logging in and out. */
export function createLogins(deps: LoginDeps) {
  const { store } = deps;

  /**
   * The role a token logs in as: one of this service's own tokens (the agent's API: an approver; the viewer's),
   * else the operator's when the gateway accepts it on an operator-only route. Anything else is refused.
   */
  async function roleOf(token: string): Promise<Role> {
    const own = deps.security.tokens.find((t) => tokenMatches(token, t.token));
    if (own && (own.role === 'user' || own.role === 'viewer')) return own.role;
    // A gateway that answers its operator's route without any token would vouch for any string.
    if (await gatewayAccepts(undefined)) {
      throw new HttpError(
        401,
        'The gateway takes no token, so no operator login can be checked: log in with AGENT_API_TOKEN or VIEWER_TOKEN, ' +
          'or set GATEWAY_ADMIN_TOKEN on the gateway',
      );
    }
    if (await gatewayAccepts(token)) return 'admin';
    throw new HttpError(
      401,
      'That token does not open the console: log in with VIEWER_TOKEN (read only), AGENT_API_TOKEN (run tasks, ' +
        'decide approvals) or GATEWAY_ADMIN_TOKEN (everything); the command toolshift token <role> prints each',
    );
  }

  /** Whether the gateway answers its operator-only route with `token` (or with none). */
  async function gatewayAccepts(token: string | undefined): Promise<boolean> {
    try {
      await callRoute(
        { ...deps.gateway, headers: token ? { authorization: `Bearer ${token}` } : undefined },
        gatewayRoutes.getPolicy,
      );
      return true;
    } catch (err) {
      if (err instanceof ServiceError && (err.status === 401 || err.status === 403)) return false;
      throw err;
    }
  }

  /**
   * Whether `token` is still the token of `role`. This service's own roles are compared with the tokens this
   * process holds; the operator's is the gateway's to say (only it holds GATEWAY_ADMIN_TOKEN), asked now, and
   * never taken from a gateway that would answer anyone. A gateway that cannot be asked is a 503: the login is
   * neither let in nor ended.
   */
  async function stillHeld(role: string, token: string): Promise<boolean> {
    if (role !== 'admin') {
      return deps.security.tokens.some((t) => t.role === role && tokenMatches(token, t.token));
    }
    try {
      const [withToken, withNone] = await Promise.all([gatewayAccepts(token), gatewayAccepts(undefined)]);
      return withToken && !withNone;
    } catch (err) {
      throw new HttpError(
        503,
        `The gateway (${deps.gateway.baseUrl}) could not be asked whether this operator login's token is still ` +
          `GATEWAY_ADMIN_TOKEN: ${(err as Error).message}; retry once the gateway is up`,
        {},
        { 'retry-after': '5' },
      );
    }
  }

  /** A new login for `token` as `role`: its secret (the cookie's value). */
  async function open(role: Role, token: string): Promise<string> {
    const secret = randomBytes(32).toString('base64url');
    await store.saveLogin({
      id_hash: hashOf(secret),
      kind: 'session',
      role,
      sealed: seal(secret, token),
      expires_at: Date.now() + deps.sessionMs,
    });
    return secret;
  }

  const door: ConsoleDoor = {
    prefix: CONSOLE_PREFIX,
    cookieOf: cookieName,
    loginPath: LOGIN_PATH,
    open: new Set([
      `GET ${LOGIN_PATH}`,
      `POST ${LOGIN_PATH}`,
      'POST /console/links',
      'GET /console/assets/console.js',
      'GET /console/assets/lib.js',
      'GET /console/assets/task.js',
      'GET /console/assets/console.css',
      'GET /console/assets/icon.svg',
    ]),
    async resolve(secret): Promise<ConsoleLogin | undefined> {
      const id = hashOf(secret);
      const row = await store.login(id);
      const token = row && unseal(secret, row.sealed);
      if (!row || token === undefined) return undefined;
      // A login ends when its token is changed (rotated), the operator's too: deleted, so it opens nothing on
      // any process even if the old token came back.
      if (!(await stillHeld(row.role, token))) {
        await store.dropLogin(id);
        return undefined;
      }
      return {
        role: row.role === 'admin' ? 'user' : (row.role as Role),
        consoleRole: row.role as Role,
        credential: row.id_hash,
        csrf: createHmac('sha256', secret).update('csrf').digest('base64url'),
        token,
      };
    },
  };

  const cookieOptions = (c: Context) => ({
    httpOnly: true,
    sameSite: 'Strict' as const,
    path: '/',
    secure: new URL(c.req.url).protocol === 'https:',
    maxAge: Math.floor(deps.sessionMs / 1000),
  });

  return {
    door,
    /** Logs in with a token: sets the cookie. */
    async logIn(c: Context, token: string): Promise<Role> {
      const role = await roleOf(token);
      setCookie(c, cookieName(c), await open(role, token), cookieOptions(c));
      return role;
    },
    /** A one-time login link's code for a token (checked now: a link never grants more than its token). */
    async link(token: string): Promise<{ code: string; role: Role; expires_at: number }> {
      const role = await roleOf(token);
      const code = randomBytes(24).toString('base64url');
      const expires_at = Date.now() + LINK_MS;
      await store.saveLogin({
        id_hash: hashOf(code),
        kind: 'code',
        role,
        sealed: seal(code, token),
        expires_at,
      });
      return { code, role, expires_at };
    },
    /** Logs in with a link's code (once): sets the cookie; false when it was used or has expired. */
    async redeem(c: Context, code: string): Promise<boolean> {
      const row = code.length <= 100 ? await store.takeLoginCode(hashOf(code)) : undefined;
      const token = row && unseal(code, row.sealed);
      if (!row || token === undefined || !(await stillHeld(row.role, token))) return false;
      setCookie(c, cookieName(c), await open(row.role as Role, token), cookieOptions(c));
      return true;
    },
    /** Ends the request's login (its row goes: the cookie opens nothing on any process) and clears the cookie. */
    async logOut(c: Context): Promise<void> {
      const login = c.get('consoleLogin');
      if (login) await store.dropLogin(login.credential);
      deleteCookie(c, cookieName(c), { path: '/', secure: cookieOptions(c).secure });
    },
  };
}

export type Logins = ReturnType<typeof createLogins>;
