import type { LookupFunction } from 'node:net';
import { Agent, buildConnector, type Dispatcher, EnvHttpProxyAgent } from 'undici';
import { assertPublic, type CheckOptions, type ResolvedAddress, resolveChecked } from './resolve.ts';

// The undici dispatcher fetch_url and webhooks send every request through. The address check lives in the connector, so
// it runs when a socket is opened, on the addresses that socket will dial — a check made earlier (when the URL
// was read, or by another DNS answer) can never be what lets a connection through.
//
// Decision: all or nothing. The connector resolves the host once, refuses the connection when ANY answer is not
// public unicast, and hands exactly those checked answers to net.connect through `lookup`, so Node dials one of
// them and never asks DNS again. After the socket connects its remoteAddress is checked once more.

/** What the guard needs: how to resolve names, which hosts the operator allowed, the connect timeout. */
export interface GuardOptions extends CheckOptions {
  connectTimeoutMs: number;
}

/** The outgoing proxy fetch_url may use; only with FETCH_USE_PROXY=1 (see README, "Web safety"). */
export interface ProxyOptions {
  httpProxy?: string;
  httpsProxy?: string;
  noProxy?: string;
}

/** An undici connector that refuses to open a socket to anything but a public unicast address. */
export function guardedConnector(opts: GuardOptions): buildConnector.connector {
  return (connectOpts, callback) => {
    const host = connectOpts.hostname;
    const port = Number(connectOpts.port) || (connectOpts.protocol === 'https:' ? 443 : 80);
    const allowed = opts.allow.allows(host, port);
    resolveChecked(host, port, opts).then(
      (answers) => {
        const connect = buildConnector({ timeout: opts.connectTimeoutMs, lookup: fixedLookup(answers) });
        connect(connectOpts, (err, socket) => {
          if (err || !socket) return callback(err ?? new Error(`Could not connect to ${host}`), null);
          if (!allowed) {
            try {
              assertPublic(host, socket.remoteAddress ?? 'an unknown address', opts.hint);
            } catch (refused) {
              socket.destroy();
              return callback(refused as Error, null);
            }
          }
          callback(null, socket);
        });
      },
      (err: Error) => callback(err, null),
    );
  };
}

/** A `lookup` for net.connect that answers with addresses already resolved and checked, never asking DNS. */
function fixedLookup(answers: ResolvedAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const wanted = options.family === 4 || options.family === 6 ? options.family : undefined;
    const list = wanted ? answers.filter((a) => a.family === wanted) : answers;
    if (list.length === 0) {
      const err: NodeJS.ErrnoException = new Error(`No IPv${wanted} address for ${_hostname}`);
      err.code = 'ENOTFOUND';
      callback(err, '', 0);
      return;
    }
    if (options.all) callback(null, list);
    else callback(null, list[0].address, list[0].family);
  };
}

/**
 * The dispatcher for one fetch_url call: direct connections through the guard, or — only when the operator
 * turned FETCH_USE_PROXY on — through the configured proxy (NO_PROXY hosts still go direct, guarded).
 * Proxy settings come from config, never from process.env at call time.
 */
export function createGuardedDispatcher(opts: GuardOptions & { proxy?: ProxyOptions }): Dispatcher {
  const connect = guardedConnector(opts);
  const common = { connect, connections: 4, keepAliveTimeout: 1000 };
  if (!opts.proxy) return new Agent(common);
  return new EnvHttpProxyAgent({
    ...common,
    httpProxy: opts.proxy.httpProxy ?? '',
    httpsProxy: opts.proxy.httpsProxy ?? '',
    noProxy: opts.proxy.noProxy ?? '',
  });
}
