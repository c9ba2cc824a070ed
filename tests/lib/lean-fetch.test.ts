import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { leanFetch, MAX_ANSWER_BYTES } from '../../lib/http/lean-fetch.ts';

// The model endpoint's whole answers (a reply without streaming) come through leanFetch: a hostile or broken
// endpoint that answers without end is read up to a bound, not into memory until the process dies.

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

async function endless(): Promise<{ url: string; closed: Promise<void> }> {
  let closed!: () => void;
  const gone = new Promise<void>((r) => {
    closed = r;
  });
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(1024 * 1024, 'a');
    const more = () => {
      while (res.write(chunk)) {}
    };
    res.on('drain', more);
    res.on('close', () => closed());
    more();
  });
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`,
    closed: gone,
  };
}

describe('leanFetch', () => {
  it('reads an answer without end up to its bound, then fails naming it and hangs up', async () => {
    const { url, closed } = await endless();
    await expect(leanFetch(url, { method: 'POST', body: '{}' })).rejects.toThrow(
      `answered more than ${MAX_ANSWER_BYTES} bytes`,
    );
    // The connection is dropped: the server stops writing.
    await closed;
  });

  it('hands on a whole answer within the bound', async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const res = await leanFetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/x`, {
      method: 'POST',
      body: '{}',
    });
    expect(await res.json()).toEqual({ ok: true });
  });
});
