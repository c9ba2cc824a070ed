import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type FixtureTool, startMcpHttpServer, text } from '../../helpers/mcp-http-server.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// A Streamable HTTP upstream built in the test with the SDK v2 server on loopback, reached through a
// toolset file's {mcp: {url, headers}} with a bearer token from ${VAR}, in both protocol eras.

let stack: Stack | undefined;
let server: Awaited<ReturnType<typeof startMcpHttpServer>> | undefined;
afterEach(async () => {
  await stack?.close();
  await server?.close();
  stack = undefined;
  server = undefined;
});

const FORECAST: FixtureTool = {
  definition: {
    name: 'forecast',
    title: 'Weather forecast',
    description: 'Forecast for a city',
    inputSchema: {
      type: 'object',
      properties: {
        city: { type: 'string', description: 'City name' },
        days: { type: 'integer', minimum: 1 },
      },
      required: ['city'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, openWorldHint: true },
  },
  run: (args, seen) => text(`${args.city}: sunny (${seen.era} era)`),
};

const TOOLS: FixtureTool[] = [
  FORECAST,
  {
    // A careless server that echoes the credential it was sent.
    definition: {
      name: 'whoami',
      description: 'Say which credential you were sent',
      inputSchema: { type: 'object' },
    },
    run: (_args, seen) => text(`you sent ${seen.authorization}`),
  },
  {
    definition: {
      name: 'station',
      description: 'Readings of a weather station',
      inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
      outputSchema: {
        type: 'object',
        properties: { id: { type: 'string' }, celsius: { type: 'number' } },
        required: ['id', 'celsius'],
      },
    },
    run: (args) => ({
      content: [{ type: 'text', text: `station ${args.id}: 21.5 C` }],
      structuredContent: { id: String(args.id), celsius: 21.5 },
    }),
  },
  {
    definition: { name: 'radar', description: 'Radar image', inputSchema: { type: 'object' } },
    run: () => ({ isError: true, content: [{ type: 'text', text: 'radar is offline until 18:00' }] }),
  },
];

const weatherToolset = (protocol: string) => `id: weather
description: Weather forecasts and station readings.
variables: [WEATHER_URL, WEATHER_TOKEN]
backend:
  mcp:
    url: \${WEATHER_URL}
    protocol: ${protocol}
    headers:
      Authorization: "Bearer \${WEATHER_TOKEN}"
`;

/** Every byte of the gateway's SQLite files (database, WAL). */
function databaseBytes(dataDir: string): Buffer {
  return Buffer.concat(
    readdirSync(dataDir)
      .filter((f) => f.startsWith('gateway.db'))
      .map((f) => readFileSync(path.join(dataDir, f))),
  );
}

describe('a Streamable HTTP upstream', () => {
  it.each([
    ['legacy', '2025-11-25', 'legacy'],
    ['2026-07-28', '2026-07-28', 'modern'],
  ])('serves its tools through the gateway (protocol: %s)', async (protocol, negotiated, era) => {
    const secret = `tok-${randomUUID()}`;
    server = await startMcpHttpServer({ tools: TOOLS, token: secret });
    stack = await makeStack({
      toolsets: { 'weather.yaml': weatherToolset(protocol) },
      vars: { WEATHER_URL: server.url, WEATHER_TOKEN: secret },
    });
    const s = stack;
    const on = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['weather'],
      session_id: 'w',
    });
    expect(on.body.added_tools).toEqual(['forecast', 'whoami', 'station', 'radar']);
    // Definitions are offered as the server gave them: schema and annotations unchanged.
    const tools = (await s.get(s.gatewayApp, '/mcp/tools?session_id=w')).body.tools;
    expect(tools[0]).toEqual({
      name: 'forecast',
      description: 'Forecast for a city',
      parameters: FORECAST.definition.inputSchema,
      annotations: { readOnlyHint: true, openWorldHint: true },
      toolset: 'weather',
    });
    // A tool that declares what it returns carries that schema (its calls' structuredContent); one without has none.
    const station = TOOLS.find((t) => t.definition.name === 'station');
    expect(tools.find((t: { name: string }) => t.name === 'station')).toMatchObject({
      output_schema: station?.definition.outputSchema,
    });
    expect(tools[0]).not.toHaveProperty('output_schema');
    const call = (name: string, args: unknown) =>
      s.post(s.gatewayApp, `/mcp/tools/${name}/call`, { session_id: 'w', arguments: args });
    expect((await call('forecast', { city: 'Paris' })).body).toMatchObject({
      success: true,
      result: `Paris: sunny (${era} era)`,
    });
    // The gateway checks arguments against the upstream's own schema before calling it.
    const bad = await call('forecast', { city: 'Paris', days: 0, hail: true });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(
      /unexpected property 'hail'; days must be >= 1\. Expected: \{city: string, days\?: integer\}/,
    );
    expect((await call('station', { id: 'x1' })).body).toMatchObject({
      success: true,
      result: { id: 'x1', celsius: 21.5 },
    });
    expect((await call('radar', {})).body).toMatchObject({
      success: false,
      error: 'radar is offline until 18:00',
    });
    expect(server.state.eras).toContain(era);
    expect(server.state.eras.every((e) => e === era)).toBe(true);
    expect(server.state.requests.every((r) => r.authorized)).toBe(true);
    expect(s.gateway.upstreams()[`\${WEATHER_URL}`]).toMatchObject({ state: 'up', protocol: negotiated });

    // The token reached the server, and never comes back out: not in results, listings, health or SQLite.
    const echoed = (await call('whoami', {})).body;
    expect(echoed.result).toBe(`you sent Bearer \${WEATHER_TOKEN}`);
    const listing = await s.get(s.gatewayApp, '/mcp/admin/toolsets?session_id=w');
    expect(listing.body.toolsets[0].backend).toEqual({
      mcp: { url: `\${WEATHER_URL}`, protocol, headers: { Authorization: `Bearer \${WEATHER_TOKEN}` } },
    });
    const health = await s.get(s.gatewayApp, '/health');
    for (const body of [echoed, listing.body, health.body, on.body]) {
      expect(JSON.stringify(body)).not.toContain(secret);
    }
    expect(databaseBytes(s.dataDir).includes(secret)).toBe(false);
    expect(databaseBytes(s.dataDir).includes('Forecast for a city')).toBe(true);
  });

  it('shows a server that went away down with the reason, and uses it again when it is back', async () => {
    server = await startMcpHttpServer({ tools: TOOLS });
    const port = Number(new URL(server.url).port);
    stack = await makeStack({
      toolsets: { 'weather.yaml': weatherToolset('auto') },
      vars: { WEATHER_URL: server.url, WEATHER_TOKEN: 'unused' },
    });
    const s = stack;
    const call = () =>
      s.post(s.gatewayApp, '/mcp/tools/forecast/call', { session_id: 'w', arguments: { city: 'Oslo' } });
    const listed = async () =>
      (await s.get(s.gatewayApp, '/mcp/admin/toolsets?session_id=w')).body.toolsets[0] as {
        health: string;
        health_reason?: string;
      };
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['weather'],
      session_id: 'w',
    });
    expect((await call()).body.result).toMatch(/^Oslo: sunny/);
    await server.close();
    // The kept-alive socket may be closed under the first call (that call alone fails: it may have run); the
    // next connection is refused, and the server is shown down for every session, with the reason.
    let failed = (await call()).body;
    if (!/cannot reach it/.test(failed.error)) {
      expect(failed.success).toBe(false);
      failed = (await call()).body;
    }
    expect(failed.success).toBe(false);
    expect(failed.error).toBe(
      `\${WEATHER_URL} is not available: cannot reach it (ECONNREFUSED); it is tried again on later calls`,
    );
    expect(await listed()).toMatchObject({ health: 'down', health_reason: 'cannot reach it (ECONNREFUSED)' });
    // Tried again (a reconnect, or refused within the back-off): still down, saying why.
    expect((await call()).body.error).toMatch(/cannot connect \(ECONNREFUSED\)/);
    expect(await listed()).toMatchObject({ health: 'down', health_reason: 'cannot connect (ECONNREFUSED)' });
    // Back on its address: refused while the back-off lasts, saying so; once it has passed, the next call
    // reconnects.
    server = await startMcpHttpServer({ tools: TOOLS, port });
    const refusals: string[] = [];
    await vi.waitFor(
      async () => {
        const answer = (await call()).body;
        if (!answer.success) refusals.push(answer.error);
        expect(answer.result).toMatch(/^Oslo: sunny/);
      },
      { timeout: 10_000, interval: 100 },
    );
    for (const refusal of refusals)
      expect(refusal).toMatch(/is down \(cannot connect .*the next restart attempt/);
    expect((await listed()).health).toBe('up');
  });

  it('refuses the activation when the server rejects the token, and shows the toolset down with the reason', async () => {
    server = await startMcpHttpServer({ tools: TOOLS, token: 'the-right-token' });
    stack = await makeStack({
      toolsets: { 'weather.yaml': weatherToolset('auto') },
      vars: { WEATHER_URL: server.url, WEATHER_TOKEN: 'a-wrong-token' },
    });
    const res = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['weather'],
      session_id: 'w',
    });
    expect(res.status).toBe(502);
    expect(res.body.error).toMatch(
      /^Cannot activate weather: \$\{WEATHER_URL\} is not available: cannot connect: /,
    );
    expect(res.body.error).toMatch(/401/);
    expect(JSON.stringify(res.body)).not.toContain('a-wrong-token');
    const listed = (await stack.get(stack.gatewayApp, '/mcp/admin/toolsets?session_id=w')).body.toolsets[0];
    expect(listed).toMatchObject({ active: false, health: 'down' });
    expect(listed.health_reason).toMatch(/401/);
  });
});
