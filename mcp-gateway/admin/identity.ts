import type { Hono } from 'hono';
import { HttpError, route } from '../../lib/http/http.ts';
import { parseDuration } from '../../lib/identity/keys.ts';
import type { IdentityStore } from '../../lib/identity/store.ts';
import { PolicyError, parsePolicy } from '../ceiling/policy.ts';
import { identityRoutes as routes } from '../contract.ts';

// The operator's people on the gateway's admin API: users, their keys, teams and limits (lib/identity keeps them,
// every service takes the keys). `toolshift users|keys|teams` and the console call these.

export function identityAdminRoutes(app: Hono, identity: IdentityStore): void {
  route(app, routes.listUsers, async (c) => c.json({ users: await identity.users() }));
  route(app, routes.addUser, async (c, { body }) => c.json(await identity.addUser(body), 201));
  route(app, routes.removeUser, async (c, { params }) => {
    await identity.removeUser(params.name);
    return c.json({ removed: params.name });
  });
  route(app, routes.setUserLimits, async (c, { params, body }) =>
    c.json(await identity.setUserLimits(params.name, body.limits)),
  );
  route(app, routes.listKeys, async (c, { query }) => c.json({ keys: await identity.keys(query.user) }));
  route(app, routes.createKey, async (c, { body }) => {
    const expiresInMs = body.expires_in === undefined ? undefined : parseDuration(body.expires_in);
    if (body.expires_in !== undefined && expiresInMs === undefined) {
      throw new HttpError(400, `expires_in ${body.expires_in} is not a time: give 30d, 12h or 90m`);
    }
    const made = await identity.createKey({
      user: body.user,
      role: body.role,
      expiresInMs,
      label: body.label,
    });
    // Shown once: never kept by a cache on the way.
    c.header('cache-control', 'no-store');
    return c.json(made, 201);
  });
  route(app, routes.revokeKey, async (c, { params }) => c.json(await identity.revokeKey(params.id)));
  route(app, routes.listTeams, async (c) => c.json({ teams: await identity.teams() }));
  route(app, routes.addTeam, async (c, { body }) => c.json(await identity.addTeam(body), 201));
  route(app, routes.removeTeam, async (c, { params }) => {
    await identity.removeTeam(params.name);
    return c.json({ removed: params.name });
  });
  route(app, routes.setTeamLimits, async (c, { params, body }) =>
    c.json(await identity.setTeamLimits(params.name, body.limits)),
  );
  route(app, routes.setTeamToolsets, async (c, { params, body }) => {
    await identity.setTeamToolsets(params.name, body.enable ?? [], false);
    return c.json(await identity.setTeamToolsets(params.name, body.disable ?? [], true));
  });
  route(app, routes.setTeamPolicy, async (c, { params, body }) => {
    if (body.policy !== null) {
      try {
        parsePolicy(body.policy, `team ${params.name}'s policy`);
      } catch (err) {
        if (err instanceof PolicyError) throw new HttpError(400, err.message);
        throw err;
      }
    }
    return c.json(await identity.setTeamPolicy(params.name, body.policy));
  });
  route(app, routes.addMember, async (c, { params }) =>
    c.json(await identity.setMember(params.name, params.user, true)),
  );
  route(app, routes.removeMember, async (c, { params }) =>
    c.json(await identity.setMember(params.name, params.user, false)),
  );
}
