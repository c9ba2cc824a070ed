import type { Context, Hono } from 'hono';
import { HttpError, route } from '../../lib/http/http.ts';
import type { Sealer } from '../../lib/identity/sealed.ts';
import type { IdentityStore } from '../../lib/identity/store.ts';
import type { OAuthAccounts } from '../backends/oauth-accounts.ts';
import type { Catalog } from '../catalog/catalog.ts';
import { accountRoutes as routes } from '../contract.ts';

// A person's own upstream accounts on the gateway's API: the values they set for toolsets' `user_secrets`
// (`toolshift secrets set|list|remove`), kept sealed in lib/identity and used for their calls (catalog-state.ts
// routeOf), and whether they connected each (their OAuth grants: connect.ts). Each person acts on their own only;
// the service tokens are nobody's.

export interface AccountDeps {
  identity: IdentityStore;
  sealer: Sealer;
  catalog: Catalog;
  /** People's OAuth grants; absent, OAuth toolsets cannot be connected. */
  oauth?: OAuthAccounts;
  /** Where a person connects their own account for a toolset (the console's page). */
  connectUrl?: (toolset: string) => string;
}

/** The user the request acts for, or 400 saying a person's own values need their own key. */
export function userOf(c: Context): string {
  const principal = c.get('principal');
  const user = principal && 'user' in principal ? principal.user : undefined;
  if (!user) {
    throw new HttpError(
      400,
      "A person's own secrets need their own credential (a user's key, or signing in): the service tokens are nobody's",
    );
  }
  return user.user.id;
}

/** 404 unless `toolset` names `name` under user_secrets (saying which it names). */
function checkSecret(catalog: Catalog, toolset: string, name: string): void {
  const spec = catalog.toolset(toolset);
  if (!spec) throw new HttpError(404, `Unknown toolset ${toolset}`);
  const names = typeof spec.backend === 'string' ? [] : (spec.backend.personal?.names ?? []);
  if (!names.includes(name)) {
    const which =
      names.length > 0 ? `it takes ${names.join(', ')}` : 'it takes none (its file names no user_secrets)';
    throw new HttpError(404, `Toolset ${toolset} takes no secret ${name} of yours: ${which}`);
  }
}

/** Whether user `user` (an id) connected their own account for `toolset` (undefined: it takes none). */
async function connectionOf(deps: AccountDeps, toolset: string, user: string) {
  const spec = deps.catalog.toolset(toolset);
  const backend = spec && typeof spec.backend !== 'string' ? spec.backend : undefined;
  const url = deps.connectUrl?.(toolset);
  const where = url ? { connect_url: url } : {};
  if (backend?.oauth) {
    const scopes = await deps.oauth?.scopesOf(user, toolset);
    return {
      toolset,
      connected: scopes !== undefined,
      missing: scopes ? [] : ['an OAuth grant'],
      ...where,
      scopes: scopes ?? [],
    };
  }
  const personal = backend?.personal;
  if (!personal) return undefined;
  const own = new Set(
    (await deps.identity.secrets(user)).filter((s) => s.toolset === toolset).map((s) => s.name),
  );
  const missing = personal.unset.filter((name) => !own.has(name));
  return { toolset, connected: missing.length === 0, missing, ...where };
}

export function accountRoutesOf(app: Hono, deps: AccountDeps): void {
  route(app, routes.listConnections, async (c) => {
    const user = userOf(c);
    const ids = deps.catalog.toolsets.filter(
      (t) => typeof t.backend !== 'string' && (t.backend.personal || t.backend.oauth),
    );
    const all = await Promise.all(ids.map((t) => connectionOf(deps, t.id, user)));
    return c.json({ connections: all.flatMap((x) => (x ? [x] : [])) });
  });
  route(app, routes.connectionFor, async (c, { params, query }) => {
    const info = await connectionOf(deps, params.toolset, query.for_user.slice('user:'.length));
    if (!info) throw new HttpError(404, `Toolset ${params.toolset} takes nobody's own account`);
    return c.json(info);
  });
  route(app, routes.listSecrets, async (c) => c.json({ secrets: await deps.identity.secrets(userOf(c)) }));
  route(app, routes.setSecret, async (c, { params, body }) => {
    const user = userOf(c);
    checkSecret(deps.catalog, params.toolset, params.name);
    const info = await deps.identity.setSecret(deps.sealer, { user, ...params, value: body.value });
    return c.json(info);
  });
  route(app, routes.removeSecret, async (c, { params }) => {
    const user = userOf(c);
    if (!(await deps.identity.removeSecret(user, params.toolset, params.name))) {
      throw new HttpError(404, `You have no ${params.name} of your own for ${params.toolset}`);
    }
    return c.json({ removed: `${params.toolset}/${params.name}` });
  });
}
