import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';
import { reachableHost } from './config.ts';

/** A listening service: where it is and how to stop it. */
export interface Listening {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Listens on host:port (port 0 picks a free one) and resolves once the socket is bound. */
export function listen(app: Hono, port: number, host: string): Promise<Listening> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port, hostname: host }, (info: AddressInfo) => {
      resolve({
        url: `http://${reachableHost(host)}:${info.port}`,
        port: info.port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            if ('closeAllConnections' in server) server.closeAllConnections();
          }),
      });
    });
    server.once('error', reject);
  });
}
