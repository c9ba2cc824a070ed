import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { deleteCookie, setCookie } from 'hono/cookie';
import type { ServiceEndpoint } from '../../lib/http/http-client.ts';
import type { ConsoleDoor, ConsoleLogin, Role, Security } from '../../lib/http/security.ts';
import type { IdentityStore, KeyHolder } from '../../lib/identity/store.ts';
import type { TaskStore } from '../store/interface.ts';
import { tokenChecks } from './token-checks.ts';

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
/** The label of the key a sign-in with the identity provider makes for its login (revoked at log out). */
export const SIGN_IN_LABEL = 'console sign-in';

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

/** The door lib/http/security.ts lets a login in by: its cookie, the routes open without one, and the check. */
function consoleDoor(
  store: TaskStore,
  stillHeld: (role: string, token: string) => Promise<boolean>,
  holderOf: (token: string) => Promise<KeyHolder | undefined>,
  identity: IdentityStore | undefined,
): ConsoleDoor {
  return {
    prefix: CONSOLE_PREFIX,
    cookieOf: cookieName,
    loginPath: LOGIN_PATH,
    ...(identity ? { identity } : {}),
    open: new Set([
      `GET ${LOGIN_PATH}`,
      `POST ${LOGIN_PATH}`,
      'POST /console/links',
      // Signing in with the identity provider (console/oidc.ts): answered 404 where it is not set up.
      'GET /console/oidc/start',
      'GET /console/oidc/callback',
      // Back from an upstream's consent page (console/connect.ts): it answers a browser without a login itself.
      'GET /console/connect/callback',
      'GET /console/assets/console.js',
      'GET /console/assets/lib.js',
      'GET /console/assets/task.js',
      'GET /console/assets/thread.js',
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
      const user = await holderOf(token);
      return {
        role: row.role === 'admin' ? 'user' : (row.role as Role),
        consoleRole: row.role as Role,
        credential: row.id_hash,
        csrf: createHmac('sha256', secret).update('csrf').digest('base64url'),
        token,
        ...(user ? { user } : {}),
      };
    },
  };
}

/** The console's logins: the door lib/http/security.ts lets them in by, and logging in and out. */
export function createLogins(deps: LoginDeps) {
  const { store } = deps;
  const { roleOf, stillHeld, holderOf } = tokenChecks(deps);
  const door = consoleDoor(store, stillHeld, holderOf, deps.security.identity?.store);

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
    /**
     * Ends the request's login (its row goes: the cookie opens nothing on any process) and clears the cookie; the
     * key a sign-in with the identity provider made for it is revoked.
     */
    async logOut(c: Context): Promise<void> {
      const login = c.get('consoleLogin');
      if (login) await store.dropLogin(login.credential);
      const identity = deps.security.identity?.store;
      if (login?.user && identity) {
        const key = (await identity.keys(login.user.user.name)).find((k) => k.id === login.user?.keyId);
        if (key?.label === SIGN_IN_LABEL && key.revoked_at === null) await identity.revokeKey(key.id);
      }
      deleteCookie(c, cookieName(c), { path: '/', secure: cookieOptions(c).secure });
    },
  };
}

export type Logins = ReturnType<typeof createLogins>;
