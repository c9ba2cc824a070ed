import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';

// Timing helpers shared by the latency figures: percentiles, and the bare loopback HTTP round trip every
// latency is compared with — the HTTP client the services use between themselves (undici's request API,
// kept-alive connections) posting a small JSON body to a plain Node server that answers at once, measured in
// the same run as the figure it scales. (Node's fetch takes about three times as long for the same trip.)

/** The p-th percentile (0..1) of `xs`. */
export function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/** Runs `fn` `n` times one after another (after `warm` unmeasured runs) and returns each duration in ms. */
export async function timeEach(n: number, fn: (i: number) => Promise<unknown>, warm = 20): Promise<number[]> {
  for (let i = 0; i < warm; i++) await fn(i);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await fn(i);
    out.push(performance.now() - started);
  }
  return out;
}

/** A server that answers every request at once with a small JSON body. */
export function startBareServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      }),
    ),
  );
}

/** One bare round trip: POST a small JSON body and read the answer. */
export async function bareRoundTrip(url: string): Promise<void> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"text":"ping"}',
  });
  await res.body.text();
}

/** POST JSON with the services' client and parse the answer; a non-2xx answer throws. */
// biome-ignore lint/suspicious/noExplicitAny: the answers are read field by field as each route documents them
export async function postFast(url: string, body: unknown): Promise<any> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode < 200 || res.statusCode > 299)
    throw new Error(`${url} answered ${res.statusCode}: ${text}`);
  return JSON.parse(text);
}

/** Interleaves measurements of several probes (so a noisy moment hits all alike) and returns each one's times. */
export async function interleaved<K extends string>(
  rounds: number,
  probes: Record<K, () => Promise<unknown>>,
  warm = 30,
): Promise<Record<K, number[]>> {
  const keys = Object.keys(probes) as K[];
  for (let i = 0; i < warm; i++) for (const k of keys) await probes[k]();
  const out = Object.fromEntries(keys.map((k) => [k, [] as number[]])) as unknown as Record<K, number[]>;
  for (let i = 0; i < rounds; i++) {
    for (const k of keys) {
      const started = performance.now();
      await probes[k]();
      out[k].push(performance.now() - started);
    }
  }
  return out;
}
