import { afterEach, describe, expect, it } from 'vitest';
import { agentRoutes } from '../../agent-server/contract.ts';
import type { RouteSpec } from '../../lib/http.ts';
import { gatewayRoutes } from '../../mcp-gateway/contract.ts';
import { toolServerRoutes } from '../../tool-server/contract.ts';
import { makeStack, type Stack } from '../helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('/openapi.json', () => {
  it('describes exactly the contract routes of each service, with schemas generated from the contract', async () => {
    stack = await makeStack();
    const cases: [Stack['agentApp'], Record<string, RouteSpec>][] = [
      [stack.agentApp, agentRoutes],
      [stack.gatewayApp, gatewayRoutes],
      [stack.toolApp, toolServerRoutes],
    ];
    for (const [app, routes] of cases) {
      const doc = (await (await app.request('/openapi.json')).json()) as {
        paths: Record<
          string,
          Record<string, { requestBody?: { content: Record<string, { schema: unknown }> } }>
        >;
      };
      const documented = Object.entries(doc.paths).flatMap(([p, ops]) =>
        Object.keys(ops).map((m) => `${m} ${p}`),
      );
      expect(documented.sort()).toEqual(
        Object.values(routes)
          .map((r) => `${r.method} ${r.path}`)
          .sort(),
      );
    }
    const gateway = (await (await stack.gatewayApp.request('/openapi.json')).json()) as any;
    const body = gateway.paths['/mcp/admin/toolsets'].post.requestBody.content['application/json'].schema;
    expect(body.properties.action.enum).toEqual(['ACTIVATE', 'DEACTIVATE', 'ENABLE', 'DISABLE']);
    expect(body.required).toEqual(['action', 'toolset_ids']);
  });

  it('serves every documented route (none answers the unknown-route 404)', async () => {
    stack = await makeStack();
    const res = await stack.toolApp.request('/tools');
    expect(res.status).toBe(200);
    const unknown = await stack.toolApp.request('/nope');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: string }).error).toMatch(/No route for GET \/nope/);
  });
});
