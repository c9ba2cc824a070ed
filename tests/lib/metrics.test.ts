import { Writable } from 'node:stream';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { installBase } from '../../lib/http/http.ts';
import { createLogger, shapeOf } from '../../lib/telemetry/log.ts';
import { createMetrics } from '../../lib/telemetry/metrics.ts';
import { makeStack, openSecurity, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

// /metrics behind each service's checks, HTTP series by route pattern, and the log formats.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

function sink() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { lines, stream };
}

describe('/metrics', () => {
  it('needs the service’s token like every route, and then answers in the Prometheus text format', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      tokens: { admin: 'adm-1', agent: 'agt-2', gateway: 'tls-3', user: 'usr-4' },
    });
    const cases: [Hono, string][] = [
      [stack.agentApp, 'usr-4'],
      [stack.gatewayApp, 'adm-1'],
      [stack.toolApp, 'tls-3'],
    ];
    for (const [app, token] of cases) {
      expect((await app.request('/metrics')).status).toBe(401);
      const res = await app.request('/metrics', { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(await res.text()).toMatch(/^# HELP toolshift_http_requests_total /m);
    }
  });

  it('counts requests by method, route pattern and status (an unknown path is one series)', async () => {
    const metrics = createMetrics();
    const app = new Hono();
    installBase(app, createLogger('t', 'silent'), openSecurity, { metrics });
    app.get('/items/:id', (c) => c.json({ id: c.req.param('id') }));
    await app.request('/items/1');
    await app.request('/items/2');
    await app.request('/nope/a');
    await app.request('/nope/b');
    const text = await (await app.request('/metrics')).text();
    expect(text).toContain('toolshift_http_requests_total{method="GET",route="/items/:id",status="200"} 2');
    expect(text).toContain('toolshift_http_requests_total{method="GET",route="unmatched",status="404"} 2');
    expect(text).toMatch(
      /toolshift_http_request_duration_seconds_count\{method="GET",route="\/items\/:id"\} 2/,
    );
    expect(metrics.registry.getSingleMetric('toolshift_http_requests_total')).toBeDefined();
  });
});

describe('logs', () => {
  it('writes one JSON line per request at debug with its request id, echoed to the client', async () => {
    const { lines, stream } = sink();
    const app = new Hono();
    installBase(app, createLogger('svc', 'debug', stream), openSecurity);
    app.get('/ping', (c) => c.json({ ok: true }));
    const res = await app.request('/ping', { headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers.get('x-request-id')).toBe('abc-123');
    expect(res.headers.get('x-toolshift-service')).toBe('svc');
    const access = JSON.parse(lines.find((l) => l.includes('"msg":"request"')) ?? '{}');
    expect(access).toMatchObject({
      level: 20,
      name: 'svc',
      request_id: 'abc-123',
      method: 'GET',
      path: '/ping',
      status: 200,
    });
    // A malformed id is replaced by a fresh one rather than written to logs and headers.
    const bad = await app.request('/ping', { headers: { 'x-request-id': 'has spaces\tand tabs' } });
    expect(bad.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('writes readable lines with LOG_FORMAT=pretty, and shapes instead of values for arguments', () => {
    const { lines, stream } = sink();
    const log = createLogger('agent-server', 'info', stream, 'pretty');
    log.warn({ task: 't1', reason: 'model endpoint answered 401' }, 'task ended: failed');
    const text = lines.join('');
    expect(() => JSON.parse(text)).toThrow();
    expect(text).toMatch(/WARN.*\(agent-server\): task ended: failed/);
    expect(text).toMatch(/reason: "model endpoint answered 401"/);
    expect(
      shapeOf({ path: 'a.txt', content: 'secret', n: 3, list: [1, 'x'], nested: { deep: { deeper: 1 } } }),
    ).toEqual({
      path: 'string(5)',
      content: 'string(6)',
      n: 'number',
      list: ['number', 'string(1)'],
      nested: { deep: 'object(1 keys)' },
    });
  });
});
