import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig, reachableHost } from '../../lib/config/config.ts';
import { installBase, MAX_BODY_BYTES, route } from '../../lib/http/http.ts';
import { callRoute, ServiceError } from '../../lib/http/http-client.ts';
import { asLoopback, log, openSecurity } from '../helpers/stack.ts';

describe('configuration', () => {
  it('derives the URLs from host and ports, with brackets for IPv6 and loopback for wildcards', () => {
    expect(reachableHost('0.0.0.0')).toBe('127.0.0.1');
    expect(reachableHost('::')).toBe('[::1]');
    expect(reachableHost('::1')).toBe('[::1]');
    expect(reachableHost('10.1.2.3')).toBe('10.1.2.3');
    const c = loadConfig({ HOST: '::', AGENT_PORT: '9000', GATEWAY_PORT: '9001', TOOL_SERVER_PORT: '9002' });
    expect([c.agent.url, c.gateway.url, c.tools.url]).toEqual([
      'http://[::1]:9000',
      'http://[::1]:9001',
      'http://[::1]:9002',
    ]);
    expect(new URL(c.gateway.url).port).toBe('9001');
  });

  it("keeps the operator's policy with the data, not in the installation an upgrade replaces", () => {
    const c = loadConfig({ TOOLSHIFT_DATA_DIR: '/srv/toolshift' });
    expect(c.gateway.policyFile).toBe('/srv/toolshift/policy.yaml');
    expect(
      loadConfig({ TOOLSHIFT_DATA_DIR: '/srv/toolshift', POLICY_FILE: '/etc/p.yaml' }).gateway.policyFile,
    ).toBe('/etc/p.yaml');
  });

  it('reads the webhook settings, and refuses a secret not in Standard Webhooks form', () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const c = loadConfig({
      AGENT_WEBHOOK_SECRET: secret,
      AGENT_WEBHOOK_ALLOW_HOSTS: '127.0.0.1:9000, hooks.internal',
      AGENT_WEBHOOK_MAX_AGE_S: '60',
    });
    expect(c.agent.webhook).toEqual({
      secret,
      allowHosts: ['127.0.0.1:9000', 'hooks.internal'],
      timeoutMs: 15_000,
      maxAgeMs: 60_000,
    });
    expect(() => loadConfig({ AGENT_WEBHOOK_SECRET: 'hunter2hunter2hunter2hunter2' })).toThrow(
      /AGENT_WEBHOOK_SECRET: must be a Standard Webhooks secret: whsec_/,
    );
  });

  it('streams the model’s replies unless AGENT_MODEL_STREAM says not to, with a stall limit', () => {
    expect(loadConfig({}).agent.model).toMatchObject({ stream: true, stallMs: 60_000 });
    expect(
      loadConfig({ AGENT_MODEL_STREAM: 'false', AGENT_MODEL_STALL_MS: '5000' }).agent.model,
    ).toMatchObject({
      stream: false,
      stallMs: 5000,
    });
    expect(() => loadConfig({ AGENT_MODEL_STREAM: 'sometimes' })).toThrow(
      /AGENT_MODEL_STREAM: must be true or false \(1 or 0\)/,
    );
  });

  it('names every bad variable at once', () => {
    expect(() => loadConfig({ AGENT_PORT: 'abc', AGENT_MAX_STEPS: '0' })).toThrow(
      /Invalid configuration:\n {2}AGENT_PORT: .*expected number.*\n {2}AGENT_MAX_STEPS: Too small/,
    );
  });
});

describe('HTTP plumbing', () => {
  const spec = {
    method: 'post',
    path: '/echo',
    summary: 'echo',
    body: z.object({ text: z.string() }),
    responses: { 200: z.object({ text: z.string() }) },
  } as const;
  const app = new Hono();
  installBase(app, log, openSecurity);
  route(app, spec, (c, { body }) => c.json(body));

  it('refuses a body over the size limit with 413 before parsing it', async () => {
    const res = await app.request('/echo', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'x'.repeat(MAX_BODY_BYTES) }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ error: `Request body is larger than ${MAX_BODY_BYTES} bytes` });
  });

  it('gives up on a service that does not answer in time, with 504', async () => {
    const hang = (_url: string, init?: RequestInit) =>
      new Promise<Response>((_, reject) =>
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason)),
      );
    const err = await callRoute({ baseUrl: 'http://slow', fetch: hang, timeoutMs: 50 }, spec, {
      body: { text: 'a' },
    }).catch((e) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ status: 504, message: 'http://slow/echo did not answer within 50 ms' });
  });

  it('answers 504 (not an internal error) when a service behind it does not answer in time', async () => {
    const hang = (_url: string, init?: RequestInit) =>
      new Promise<Response>((_, reject) =>
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason)),
      );
    const front = new Hono();
    installBase(front, log, openSecurity);
    route(front, { ...spec, path: '/relay' }, async (c, { body }) =>
      c.json(await callRoute({ baseUrl: 'http://slow', fetch: hang, timeoutMs: 50 }, spec, { body })),
    );
    const res = await front.request('/relay', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'a' }),
    });
    expect(res.status).toBe(504);
    expect(await res.json()).toEqual({ error: 'http://slow/echo did not answer within 50 ms' });
  });

  it('round-trips through the contract on both sides', async () => {
    const res = await callRoute(
      { baseUrl: 'http://x', fetch: (u, i) => Promise.resolve(app.request(asLoopback(u), i)) },
      spec,
      {
        body: { text: 'hi' },
      },
    );
    expect(res).toEqual({ text: 'hi' });
  });
});
