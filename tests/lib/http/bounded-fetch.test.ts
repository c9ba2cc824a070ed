import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundedFetch } from '../../../lib/http/bounded-fetch.ts';

// A party outside toolshift that answers endlessly, or never: the fetch stops at its bounds, saying which.

let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/small') return res.end('{"ok":true}');
    if (req.url === '/none') return res.writeHead(204).end();
    if (req.url === '/stall') return res.writeHead(200).write('{');
    // Endless.
    res.writeHead(200);
    const more = () => {
      while (res.write('x'.repeat(16_384))) {}
    };
    res.on('drain', more);
    more();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('boundedFetch', () => {
  const get = boundedFetch({ timeoutMs: 500, maxBytes: 64 * 1024 });
  it('hands on a small answer whole', async () => {
    const res = await get(`${base}/small`);
    expect(await res.json()).toEqual({ ok: true });
    expect((await get(`${base}/none`)).status).toBe(204);
  });
  it('stops an endless answer at its byte bound', async () => {
    await expect(get(`${base}/endless`)).rejects.toThrow(`${base} answered more than 65536 bytes`);
  });
  it('stops an answer that stalls at its time bound', async () => {
    await expect(get(`${base}/stall`)).rejects.toThrow(/timeout|aborted/i);
  });
});
