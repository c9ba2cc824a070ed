import type { Hono } from 'hono';
import { HttpError, route } from '../../lib/http/http.ts';
import { OAuthError } from '../backends/oauth-protocol.ts';
import type { OAuthSpec } from '../catalog/mcp-backend-spec.ts';
import { scopedTools, scopesFor } from '../catalog/personal.ts';
import { accountRoutes as routes } from '../contract.ts';
import { type AccountDeps, userOf } from './accounts.ts';

// Connecting a person's own account at an OAuth toolset's server (backends/oauth-accounts.ts): the console's
// /console/connect/<toolset> starts it with the person's key and their browser goes to the server's consent page;
// the console's callback completes it with the same key, so a state is good for the user who started it only.

/** The toolset's OAuth settings and the tools it offers, or 404 saying it takes no OAuth account. */
function oauthOf(deps: AccountDeps, toolset: string): { oauth: OAuthSpec; include?: string[] } {
  const spec = deps.catalog.toolset(toolset);
  if (!spec) throw new HttpError(404, `Unknown toolset ${toolset}`);
  const oauth = typeof spec.backend === 'string' ? undefined : spec.backend.oauth;
  if (!oauth) {
    const how =
      typeof spec.backend !== 'string' && spec.backend.personal
        ? `; set your own ${spec.backend.personal.names.join(', ')} with: toolshift secrets set ${toolset} <NAME>`
        : '';
    throw new HttpError(
      404,
      `Toolset ${toolset} takes no OAuth account (its file has no backend.mcp.oauth)${how}`,
    );
  }
  return { oauth, include: spec.include };
}

/** The authorization server's refusal, as a 502 naming what was wrong (never a token). */
function upstreamFailure(err: unknown): never {
  if (err instanceof OAuthError) throw new HttpError(502, `Connecting failed: ${err.message}`);
  throw err;
}

export function connectRoutesOf(app: Hono, deps: AccountDeps): void {
  const accounts = () => {
    if (!deps.oauth) throw new HttpError(400, 'This gateway keeps no OAuth grants (set GATEWAY_SEAL_KEY)');
    return deps.oauth;
  };
  route(app, routes.startConnection, async (c, { params, body }) => {
    const user = userOf(c);
    const { oauth, include } = oauthOf(deps, params.toolset);
    const known = new Set([...oauth.scopes, ...Object.values(oauth.toolScopes).flat()]);
    const unknown = (body.scopes ?? []).filter((s) => !known.has(s));
    if (unknown.length > 0) {
      throw new HttpError(
        400,
        `Toolset ${params.toolset} asks for no scope ${unknown.join(', ')}; its scopes are ${[...known].join(', ') || 'none'}`,
      );
    }
    // By default, what activating the toolset asks for.
    const scopes = [
      ...new Set([
        ...scopesFor(oauth, body.scopes ? [] : scopedTools(oauth, include)),
        ...(body.scopes ?? []),
      ]),
    ];
    const url = await accounts()
      .start(user, params.toolset, oauth, { redirectUri: body.redirect_uri, scopes })
      .catch(upstreamFailure);
    return c.json({ authorization_url: url });
  });
  route(app, routes.completeConnection, async (c, { params, body }) => {
    const user = userOf(c);
    const done = await accounts().complete(user, params.toolset, body).catch(upstreamFailure);
    if ('refused' in done) {
      if (done.refused === 'another_user')
        throw new HttpError(403, 'That state is not yours: start connecting again');
      throw new HttpError(
        400,
        done.refused === 'expired'
          ? 'That connection took more than 10 minutes: start again'
          : 'No connection under way has that state (it was used already, or never made): start again',
      );
    }
    return c.json(done);
  });
  route(app, routes.revokeConnection, async (c, { params }) => {
    const user = userOf(c);
    oauthOf(deps, params.toolset);
    if (!(await accounts().drop(user, params.toolset, 'revoked by its user'))) {
      throw new HttpError(404, `You have not connected ${params.toolset}`);
    }
    return c.json({ dropped: params.toolset });
  });
}
