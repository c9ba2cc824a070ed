import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';
import { reachableHost } from '../config/config.ts';
import { DEFAULT_FLOOD_LIMITS, type FloodLimits, limitConnections } from './flood.ts';

/** A listening service: where it is and how to stop it. */
export interface Listening {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** A listen failure in words that say what to change: a port in use names its variable. */
function listenError(err: NodeJS.ErrnoException, port: number, host: string, variable?: string): Error {
  const which = variable ? `${variable}=${port}` : `port ${port}`;
  if (err.code === 'EADDRINUSE') {
    return new Error(
      `Port ${port} on ${host} is already in use (${which}). Is toolshift already running? Stop it, or set ` +
        `${variable ?? 'the port variable'} to a free port.`,
    );
  }
  if (err.code === 'EACCES') {
    return new Error(`Not allowed to listen on ${host}:${port} (${which}); choose a port above 1023.`);
  }
  if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') {
    return new Error(`Cannot listen on ${host}: no such local address (HOST=${host}).`);
  }
  return err;
}

/**
 * Listens on host:port (port 0 picks a free one) and resolves once the socket is bound; `variable` names the
 * setting of the port (AGENT_PORT …) for the error when it is taken.
 */
export function listen(
  app: Hono,
  port: number,
  host: string,
  variable?: string,
  limits: FloodLimits = DEFAULT_FLOOD_LIMITS,
): Promise<Listening> {
  return new Promise((resolve, reject) => {
    // Timeouts are checked every second (Node's default is 30 s, too coarse for a 10 s header limit).
    const serverOptions = { connectionsCheckingInterval: 1000 };
    const server = serve({ fetch: app.fetch, port, hostname: host, serverOptions }, (info: AddressInfo) => {
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
    server.once('error', (err: NodeJS.ErrnoException) => reject(listenError(err, port, host, variable)));
    // The services call each other on kept-alive connections (undici keeps one as long as the server's
    // Keep-Alive hint says): Node's 5 s closed them between a task's steps while the model thought, and every
    // step then paid for a new TCP connection at each hop. Headers must still arrive within their own limit.
    // A request's headers and body must still arrive within their own limits (slowloris), and the
    // connections are capped (lib/http/flood.ts).
    if ('keepAliveTimeout' in server) {
      server.keepAliveTimeout = 65_000;
      limitConnections(server as Server, limits);
    }
  });
}
