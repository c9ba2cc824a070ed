import type { Hono } from 'hono';
import { z } from 'zod';
import { type RouteSpec, route } from '../../lib/http/http.ts';
import { callRoute } from '../../lib/http/http-client.ts';
import {
  AddTeamRequest,
  AddUserRequest,
  CreateKeyRequest,
  gatewayRoutes,
  identityRoutes,
  PersonName,
} from '../../mcp-gateway/contract.ts';
import { asOperator, relay, type ViewOf } from './actions.ts';

// The operator's changes to people from the console's People page, relayed to the gateway's admin API with the
// login's own token (the gateway checks it too); a refusal (400, 404, 409) reaches the page in the API's words.
// Each is a POST, so lib/http/security.ts asks it for the login's CSRF token and the console's own origin.

const AT = '/console/actions/people';
const named = z.object({ name: PersonName });

/** The console's JSON routes for them, read and checked as the gateway's own are (the same schemas). */
const peopleRoutes = {
  addUser: {
    method: 'post',
    path: `${AT}/users`,
    summary: 'Add a user',
    body: AddUserRequest,
    responses: {},
  },
  removeUser: {
    method: 'post',
    path: `${AT}/users/{name}/remove`,
    summary: 'Remove a user',
    params: named,
    responses: {},
  },
  createKey: {
    method: 'post',
    path: `${AT}/keys`,
    summary: 'Make a key',
    body: CreateKeyRequest,
    responses: {},
  },
  revokeKey: {
    method: 'post',
    path: `${AT}/keys/{id}/revoke`,
    summary: 'Revoke a key',
    params: identityRoutes.revokeKey.params,
    responses: {},
  },
  addTeam: {
    method: 'post',
    path: `${AT}/teams`,
    summary: 'Add a team',
    body: AddTeamRequest,
    responses: {},
  },
  removeTeam: {
    method: 'post',
    path: `${AT}/teams/{name}/remove`,
    summary: 'Remove a team',
    params: named,
    responses: {},
  },
  addMember: {
    method: 'post',
    path: `${AT}/teams/{name}/members`,
    summary: 'Put a user in a team',
    params: named,
    body: z.strictObject({ user: PersonName }),
    responses: {},
  },
  removeMember: {
    method: 'post',
    path: `${AT}/teams/{name}/members/{user}/remove`,
    summary: 'Take a user out of a team',
    params: identityRoutes.removeMember.params,
    responses: {},
  },
} satisfies Record<string, RouteSpec>;

/** Installs the People page's actions; `viewOf` says who is logged in and gives the gateway as them. */
export function installPeopleActions(app: Hono, viewOf: ViewOf): void {
  const gateway = (c: Parameters<ViewOf>[0]) => asOperator(viewOf, c, 'Managing people');
  const r = peopleRoutes;
  route(app, r.addUser, async (c, { body }) =>
    c.json(await relay(callRoute(gateway(c), gatewayRoutes.addUser, { body })), 201),
  );
  route(app, r.removeUser, async (c, { params }) =>
    c.json(await relay(callRoute(gateway(c), gatewayRoutes.removeUser, { params }))),
  );
  route(app, r.createKey, async (c, { body }) => {
    const made = await relay(callRoute(gateway(c), gatewayRoutes.createKey, { body }));
    // The key is in this answer only: never kept by a cache on the way.
    c.header('cache-control', 'no-store');
    return c.json(made, 201);
  });
  route(app, r.revokeKey, async (c, { params }) =>
    c.json(await relay(callRoute(gateway(c), gatewayRoutes.revokeKey, { params }))),
  );
  route(app, r.addTeam, async (c, { body }) =>
    c.json(await relay(callRoute(gateway(c), gatewayRoutes.addTeam, { body })), 201),
  );
  route(app, r.removeTeam, async (c, { params }) =>
    c.json(await relay(callRoute(gateway(c), gatewayRoutes.removeTeam, { params }))),
  );
  route(app, r.addMember, async (c, { params, body }) =>
    c.json(
      await relay(callRoute(gateway(c), gatewayRoutes.addMember, { params: { ...params, user: body.user } })),
    ),
  );
  route(app, r.removeMember, async (c, { params }) =>
    c.json(await relay(callRoute(gateway(c), gatewayRoutes.removeMember, { params }))),
  );
}
