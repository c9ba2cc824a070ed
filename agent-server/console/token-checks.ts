import { callRoute, type ServiceEndpoint, ServiceError } from '../../lib/http/http-client.ts';
import { HttpError } from '../../lib/http/http-error.ts';
import { type Role, type Security, tokenMatches } from '../../lib/http/security.ts';
import type { KeyRole } from '../../lib/identity/keys.ts';
import type { KeyHolder } from '../../lib/identity/store.ts';
import { gatewayRoutes } from '../../mcp-gateway/contract.ts';

// Which role a console login's token opens, and whether it still opens it: this service's own tokens are
// compared with those this process holds; the operator's is asked of the gateway (only it holds that one).

/** What the checks need: this service's tokens, and the gateway reached without credentials. */
export interface TokenCheckDeps {
  security: Security;
  gateway: ServiceEndpoint;
}

/**
 * The console role of a user's key: a viewer reads, a runner or approver runs tasks and decides (what the gateway
 * lets their key decide), an operator operates. What they see is their own work (lib/http/security.ts).
 */
const CONSOLE_ROLE: Record<KeyRole, Role> = {
  viewer: 'viewer',
  runner: 'user',
  approver: 'user',
  operator: 'admin',
};

/** The role a token logs in as (`roleOf`), and whether a login's token is still its role's (`stillHeld`). */
export function tokenChecks(deps: TokenCheckDeps) {
  /**
   * The role a token logs in as: one of this service's own tokens (the agent's API: an approver; the viewer's),
   * else the operator's when the gateway accepts it on an operator-only route. Anything else is refused.
   */
  async function roleOf(token: string): Promise<Role> {
    const key = await keyRole(token);
    if (key) return key;
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

  /** The console role a user's key logs in as; undefined for a token that is not shaped as a key; 401 if refused. */
  async function keyRole(token: string): Promise<Role | undefined> {
    const check = await deps.security.identity?.store.checkKey(token);
    if (!check) return undefined;
    if ('refused' in check) throw new HttpError(401, check.refused);
    return CONSOLE_ROLE[check.holder.role];
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
    const check = await deps.security.identity?.store.checkKey(token);
    if (check) return 'holder' in check && CONSOLE_ROLE[check.holder.role] === role;
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

  /** Who holds `token` when it is a user's key that holds (undefined otherwise). */
  async function holderOf(token: string): Promise<KeyHolder | undefined> {
    const check = await deps.security.identity?.store.checkKey(token);
    return check && 'holder' in check ? check.holder : undefined;
  }

  return { roleOf, stillHeld, holderOf };
}
