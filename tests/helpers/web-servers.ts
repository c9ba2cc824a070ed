import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { parseAllowList } from '../../lib/net/allow-list.ts';
import type { ResolvedAddress, Resolver } from '../../lib/net/resolve.ts';
import { PathGuard } from '../../tool-server/guards/paths/guard.ts';
import type { WebContext, WebToolContext } from '../../tool-server/tools/web/context.ts';

/** A local HTTP server on 127.0.0.1 that records every request it gets (the "effect" SSRF tests look at). */
export interface LocalServer {
  port: number;
  origin: string;
  hits: string[];
  server: Server;
  close(): Promise<void>;
}

/** Starts a loopback HTTP server; `hits` lists "METHOD url" of every request that reached it. */
export async function localServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end('reached'),
): Promise<LocalServer> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  server.on('connect', (req, socket) => {
    hits.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    hits,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A resolver answering from a table, recording every question; unknown names fail like DNS does. */
export function tableResolver(table: Record<string, string | string[] | ((call: number) => string[])>) {
  const asked: string[] = [];
  const resolve: Resolver = async (hostname) => {
    asked.push(hostname);
    const entry = table[hostname];
    if (entry === undefined) {
      const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
      err.code = 'ENOTFOUND';
      throw err;
    }
    const calls = asked.filter((h) => h === hostname).length;
    const list = typeof entry === 'function' ? entry(calls) : Array.isArray(entry) ? entry : [entry];
    return list.map((address): ResolvedAddress => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { resolve, asked };
}

/** A WebToolContext for the web tools; `allow` is FETCH_ALLOW_HOSTS as entries. */
export async function webContext(
  web: Omit<WebContext, 'allow'> & { allow?: string[] } = {},
): Promise<WebToolContext> {
  const { allow, ...rest } = web;
  return {
    paths: await PathGuard.create({ roots: [tmpdir()], readOnlyRoots: [] }),
    maxReadBytes: 64 * 1024,
    web: {
      resolve: tableResolver({}).resolve,
      ...rest,
      allow: parseAllowList(allow ?? [], 'FETCH_ALLOW_HOSTS'),
    },
  };
}
