import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

// A TCP relay in front of a test's server that keeps every byte a client sent through it: what a listener
// really received (request lines, headers, bodies), for tests that prove a value never left the gateway.

/** Starts a relay to the server at `target` (an http URL); `url` is the same path through the relay. */
export async function startRecordingRelay(target: string) {
  const to = new URL(target);
  const received: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(to.port), to.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    client.on('data', (chunk: Buffer) => received.push(chunk));
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${to.pathname}`,
    /** Every byte clients sent, in order of arrival. */
    bytes: () => Buffer.concat(received),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
