import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterEach, describe, expect, it } from 'vitest';
import { agentRoutes, EventType } from '../../agent-server/contract.ts';
import { MAX_BODY_BYTES, type RouteSpec } from '../../lib/http/http.ts';
import { gatewayRoutes, mcpFaceRoutes } from '../../mcp-gateway/contract.ts';
import { toolServerRoutes } from '../../tool-server/contract.ts';
import { answer, call, calls, ScriptedModel } from '../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../helpers/stack.ts';

// Each service's /openapi.json: generated from the contract (lib/http/openapi.ts), clean under Redocly's recommended
// rules, and true to what the service answers.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

type Operation = {
  operationId: string;
  security: Record<string, string[]>[];
  parameters?: { name: string; in: string }[];
  requestBody?: { content: Record<string, { schema: { $ref?: string } }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: any }> }>;
};
type Doc = {
  info: { version: string; license: unknown };
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, any>;
    responses: Record<string, unknown>;
    securitySchemes: Record<string, { type: string; scheme: string; description: string }>;
  };
};

const TOKENS = {
  admin: 'adm-token',
  agent: 'agt-token',
  mcp: 'mcp-token',
  gateway: 'gw-token',
  user: 'usr-token',
};

async function documents(
  s: Stack,
): Promise<[string, Stack['agentApp'], Doc, Record<string, RouteSpec>, string][]> {
  const cases = [
    ['agent-server', s.agentApp, agentRoutes, TOKENS.user],
    ['mcp-gateway', s.gatewayApp, { ...gatewayRoutes, ...mcpFaceRoutes }, TOKENS.admin],
    ['tool-server', s.toolApp, toolServerRoutes, TOKENS.gateway],
  ] as const;
  const out: [string, Stack['agentApp'], Doc, Record<string, RouteSpec>, string][] = [];
  for (const [name, app, routes, token] of cases) {
    const res = await app.request('/openapi.json', { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    out.push([name, app, (await res.json()) as Doc, routes as Record<string, RouteSpec>, token]);
  }
  return out;
}

const operations = (doc: Doc) =>
  Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method, path: p, op })),
  );

describe('/openapi.json', () => {
  it('describes every route of each service once, its contract key as the operationId', async () => {
    stack = await makeStack({ tokens: TOKENS });
    for (const [, , doc, routes] of await documents(stack)) {
      const described = operations(doc).map(({ method, path, op }) => `${op.operationId} ${method} ${path}`);
      expect(described.sort()).toEqual(
        Object.entries(routes)
          .map(([key, r]) => `${key} ${r.method} ${r.path}`)
          .sort(),
      );
    }
  });

  it('is clean under Redocly’s recommended rules, warnings included', async () => {
    stack = await makeStack({ tokens: TOKENS });
    const config = await createConfig({ extends: ['recommended'] });
    for (const [name, , doc] of await documents(stack)) {
      const problems = await lintFromString({
        source: JSON.stringify(doc),
        absoluteRef: `${name}.json`,
        config,
      });
      expect(problems.map((p) => `${name}: ${p.ruleId} ${p.message} at ${p.location[0]?.pointer}`)).toEqual(
        [],
      );
    }
    // The linter does find what the documents avoid: the same check of a bare document fails.
    const bare = {
      openapi: '3.1.0',
      info: { title: 'x', version: '1' },
      paths: { '/a': { get: { responses: { 200: { description: 'ok' } } } } },
    };
    const rules = (
      await lintFromString({ source: JSON.stringify(bare), absoluteRef: 'bare.json', config })
    ).map((p) => p.ruleId);
    expect(rules).toEqual(
      expect.arrayContaining([
        'operation-operationId',
        'security-defined',
        'operation-4xx-response',
        'no-empty-servers',
        'info-license',
      ]),
    );
  });

  it('names its schemas: the contract’s exports, each route’s bodies, each event of a stream', async () => {
    stack = await makeStack({ tokens: TOKENS });
    const [[, , agent], [, , gateway]] = await documents(stack);
    const op = (doc: Doc, path: string, method: string) => doc.paths[path][method];
    expect(
      op(agent, '/agent/tasks/{id}', 'get').responses['200'].content?.['application/json'].schema,
    ).toEqual({
      $ref: '#/components/schemas/TaskDetail',
    });
    expect(op(agent, '/agent/execute_task', 'post').requestBody?.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ExecuteTaskRequest',
    });
    const request = agent.components.schemas.ExecuteTaskRequest;
    expect(Object.keys(request.properties)).toEqual(
      expect.arrayContaining(['goal', 'prompt', 'session_id', 'wait']),
    );
    expect(agent.components.schemas.Task.properties.usage).toEqual({ $ref: '#/components/schemas/Usage' });
    const body =
      gateway.components.schemas[
        op(gateway, '/mcp/admin/toolsets', 'post')
          .requestBody?.content['application/json'].schema.$ref?.split('/')
          .at(-1) as string
      ];
    expect(body.properties.action.enum).toEqual(['ACTIVATE', 'DEACTIVATE', 'ENABLE', 'DISABLE']);
    expect(body.required).toEqual(['action', 'toolset_ids']);
    // Every reference resolves, and every component is referred to.
    for (const doc of [agent, gateway]) {
      const text = JSON.stringify(doc);
      const refs = new Set([...text.matchAll(/"#\/components\/schemas\/(\w+)"/g)].map((m) => m[1]));
      expect([...refs].filter((r) => !(r in doc.components.schemas))).toEqual([]);
      expect(Object.keys(doc.components.schemas).filter((n) => !refs.has(n))).toEqual([]);
    }
  });

  it('names each role’s token as a security scheme, and which roles each route takes', async () => {
    stack = await makeStack({ tokens: TOKENS });
    const [[, , agent], [, , gateway], [, , tools]] = await documents(stack);
    expect(Object.keys(gateway.components.securitySchemes).sort()).toEqual([
      'admin',
      'agent',
      'approver',
      'mcp',
      'viewer',
    ]);
    expect(gateway.components.securitySchemes.admin).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(gateway.components.securitySchemes.admin.description).toMatch(/GATEWAY_ADMIN_TOKEN/);
    expect(agent.components.securitySchemes.user.description).toMatch(/AGENT_API_TOKEN/);
    expect(tools.components.securitySchemes.gateway.description).toMatch(/TOOL_SERVER_TOKEN/);
    expect(gateway.paths['/mcp/admin/policy'].get.security).toEqual([{ admin: [] }]);
    expect(gateway.paths['/mcp'].post.security).toEqual([{ mcp: [] }, { admin: [] }]);
    expect(agent.paths['/health'].get.security).toEqual([{}, { user: [] }, { viewer: [] }]);
    expect(agent.paths['/health'].get.responses['401']).toBeUndefined();
  });

  it('documents what the request checks answer on each route: 401, 403, 413, 415', async () => {
    stack = await makeStack({ tokens: TOKENS });
    for (const [name, app, doc, , token] of await documents(stack)) {
      for (const { method, path, op } of operations(doc)) {
        const url = path.replace(/\{(\w+)\}/g, 'x');
        const where = `${name} ${method} ${path}`;
        const ask = async (headers: Record<string, string>, body?: string) =>
          (await app.request(url, { method: method.toUpperCase(), headers, body })).status;
        const documented = (status: number) =>
          expect(Object.keys(op.responses), where).toContain(String(status));
        if (path !== '/health') {
          expect(await ask({}), where).toBe(401);
          documented(401);
        }
        expect(await ask({ origin: 'https://evil.example' }), where).toBe(403);
        documented(403);
        if (method === 'post') {
          expect(await ask({ 'content-type': 'text/plain', 'content-length': '1' }, 'x'), where).toBe(415);
          documented(415);
        }
        if (op.requestBody) {
          const huge = {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'content-length': String(MAX_BODY_BYTES + 1),
          };
          expect(await ask(huge), where).toBe(413);
          documented(413);
        }
      }
    }
  });

  it('describes the task event stream event by event, and a real stream sends only those events', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['memory'] })),
      answer('streamed'),
    ]);
    stack = await makeStack({ model });
    const [[, app, doc]] = await documents(stack);
    const described = (path: string, method: string) => {
      const schema = doc.paths[path][method].responses['200'].content?.['text/event-stream'].schema;
      return (
        schema.items.oneOf as { title: string; properties: { data: { contentSchema: { $ref: string } } } }[]
      ).map((m) => [m.title, m.properties.data.contentSchema.$ref]);
    };
    const events = described('/agent/tasks/{id}/events', 'get');
    expect(events.map(([title]) => title)).toEqual([...EventType.options, 'result']);
    expect(events).toContainEqual(['task_started', '#/components/schemas/TaskStartedEvent']);
    expect(events).toContainEqual(['result', '#/components/schemas/ExecuteTaskResponse']);
    expect(described('/agent/execute_task', 'post')).toEqual(events);
    expect(Object.keys(doc.paths['/agent/tasks/{id}/events'].get.responses)).toContain('429');

    const res = await app.request('/agent/execute_task', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ goal: 'stream it' }),
    });
    const sent = new Set([...(await res.text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1]));
    expect(sent.has('result')).toBe(true);
    expect([...sent].filter((e) => !events.some(([title]) => title === e))).toEqual([]);
  });

  it('answers an unknown route with 404 naming /openapi.json', async () => {
    stack = await makeStack();
    const unknown = await stack.toolApp.request('/nope');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: string }).error).toMatch(
      /No route for GET \/nope.*openapi\.json/,
    );
  });
});
