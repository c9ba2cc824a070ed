import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { HttpError, type RouteSpec, route } from '../../lib/http/http.ts';
import { callRoute, type ServiceEndpoint, ServiceError } from '../../lib/http/http-client.ts';
import { ApproveToolsetRequest, gatewayRoutes } from '../../mcp-gateway/contract.ts';
import type { Can } from './pages.ts';

// The operator's changes from the console (enable and disable toolsets, approve withheld upstream tools, reload
// the toolset files), relayed to the gateway with the operator's own token: the gateway checks it too.

/** The console's JSON routes for them, read and checked by lib/http/http.ts as every contract route is. */
const actionRoutes = {
  toggle: {
    method: 'post',
    path: '/console/actions/toolsets',
    summary: 'Enable or disable toolsets',
    body: z.strictObject({
      action: z.enum(['ENABLE', 'DISABLE']),
      toolset_ids: z.array(z.string().min(1).max(128)).min(1).max(64),
    }),
    responses: {},
  },
  approve: {
    method: 'post',
    path: '/console/actions/toolsets/{id}/approve',
    summary: 'Approve withheld upstream tools as shown',
    params: z.object({ id: z.string().min(1).max(128) }),
    body: ApproveToolsetRequest,
    responses: {},
  },
} satisfies Record<string, RouteSpec>;

/** Who is logged in and the gateway as them (routes.ts's viewer). */
export type ViewOf = (c: Context) => { can: Can; gateway: ServiceEndpoint };

/** The gateway as the request's login, when that login is the operator's; else a 403 saying `what` needs it. */
export function asOperator(viewOf: ViewOf, c: Context, what: string): ServiceEndpoint {
  const view = viewOf(c);
  if (!view.can.operate)
    throw new HttpError(403, `${what} needs the operator's login (GATEWAY_ADMIN_TOKEN or an operator key)`, {
      required_roles: ['admin'],
    });
  return view.gateway;
}

/** Installs the operator's actions; `viewOf` says who is logged in and gives the gateway as them. */
export function installActions(app: Hono, viewOf: ViewOf) {
  route(app, actionRoutes.toggle, async (c, { body }) => {
    const gateway = asOperator(viewOf, c, 'Enabling and disabling toolsets');
    return c.json(await relay(callRoute(gateway, gatewayRoutes.changeToolsets, { body })));
  });
  route(app, actionRoutes.approve, async (c, { params, body }) => {
    const gateway = asOperator(viewOf, c, 'Approving upstream changes');
    return c.json(
      await relay(callRoute(gateway, gatewayRoutes.approveToolset, { params: { id: params.id }, body })),
    );
  });
  app.post('/console/actions/reload', async (c) => {
    const gateway = asOperator(viewOf, c, 'Reloading toolsets');
    return c.json(await relay(callRoute(gateway, gatewayRoutes.reloadToolsets)));
  });
}

/** A gateway refusal as this service's answer (its status and message); the gateway unreachable is a 502. */
export async function relay<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof ServiceError && err.status >= 400 && err.status < 500)
      throw new HttpError(err.status as 400, err.message);
    throw err;
  }
}
