import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { callRoute, ServiceError } from '../../lib/http/http-client.ts';
import { leanFetch } from '../../lib/http/lean-fetch.ts';

// The transports the benchmark made faster, over a real loopback socket: callRoute's undici request (no
// test fetch given) keeps its deadline, abort and error semantics; leanFetch gives a fetch client (the
// model SDK) the same answers fetch would, and steps aside when the global fetch has been replaced.

let url: string;
let server: http.Server;
const seen: { method?: string; body: string; closed: boolean }[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      const entry = { method: req.method, body, closed: false };
      seen.push(entry);
      res.on('close', () => {
        entry.closed = !res.writableFinished;
      });
      if (req.url === '/slow') return; // never answers
      if (req.url === '/empty') {
        res.writeHead(204, { 'x-kind': 'empty' });
        res.end();
        return;
      }
      if (req.url === '/refuse') {
        res.writeHead(409, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'Approval needed under the policy' }));
        return;
      }
      res.writeHead(201, {
        'content-type': 'application/json',
        'set-cookie': ['a=1', 'b=2'],
        'retry-after': '3',
      });
      res.end(JSON.stringify({ echo: body, method: req.method }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const spec = (p: string) =>
  ({
    method: 'post',
    path: p,
    summary: 'test',
    responses: { 200: z.object({ echo: z.string(), method: z.string() }) },
  }) as const;

describe('callRoute over a real socket', () => {
  it('sends the JSON body and parses the answer', async () => {
    const res = await callRoute({ baseUrl: url }, { ...spec('/echo'), responses: {} }, { body: { a: 1 } });
    expect(res).toEqual({ echo: '{"a":1}', method: 'POST' });
  });

  it('fails with 504 naming the URL when the deadline passes, and closes the connection', async () => {
    const err = await callRoute({ baseUrl: url, timeoutMs: 100 }, spec('/slow')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ status: 504, message: `${url}/slow did not answer within 100 ms` });
    await expect.poll(() => seen.at(-1)?.closed).toBe(true);
  });

  it('gives up when the caller aborts, without calling it a timeout', async () => {
    const controller = new AbortController();
    const call = callRoute({ baseUrl: url }, spec('/slow'), {}, { signal: controller.signal });
    await expect.poll(() => seen.length > 0 && seen.at(-1)?.method === 'POST').toBe(true);
    controller.abort(new Error('task cancelled'));
    const err = await call.catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(ServiceError);
  });

  it('turns a refusal into a ServiceError with the service’s own message and body', async () => {
    const err = await callRoute({ baseUrl: url }, spec('/refuse')).catch((e: unknown) => e);
    expect(err).toMatchObject({
      status: 409,
      message: 'Approval needed under the policy',
      body: { error: 'Approval needed under the policy' },
    });
  });

  it('says it cannot reach a closed port (502)', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = await callRoute({ baseUrl: `http://127.0.0.1:${port}` }, spec('/x')).catch((e: unknown) => e);
    expect(err).toMatchObject({
      status: 502,
      message: expect.stringMatching(/^Cannot reach http:\/\/127\.0\.0\.1/),
    });
  });
});

describe('leanFetch', () => {
  it('answers as fetch does: status, every header, body', async () => {
    const res = await leanFetch(`${url}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"q":"hi"}',
    });
    const native = await fetch(`${url}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"q":"hi"}',
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('retry-after')).toBe('3');
    expect(res.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    expect(await res.json()).toEqual(await native.json());
    const empty = await leanFetch(`${url}/empty`);
    expect(empty.status).toBe(204);
    expect(empty.headers.get('x-kind')).toBe('empty');
    expect(await empty.text()).toBe('');
  });

  it('steps aside for a replaced global fetch (an interceptor, a test double)', async () => {
    const original = globalThis.fetch;
    const calls: string[] = [];
    globalThis.fetch = (async (input: string | URL | Request) => {
      calls.push(String(input));
      return new Response('{"intercepted":true}', { status: 200 });
    }) as typeof fetch;
    try {
      const res = await leanFetch(`${url}/echo`, { method: 'POST', body: '{}' });
      expect(await res.json()).toEqual({ intercepted: true });
      expect(calls).toEqual([`${url}/echo`]);
    } finally {
      globalThis.fetch = original;
    }
  });

  it('rejects when aborted, as fetch does', async () => {
    const controller = new AbortController();
    const pending = leanFetch(`${url}/slow`, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    await expect(pending).rejects.toThrow();
  });
});
