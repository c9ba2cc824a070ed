import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { MiddlewareHandler } from 'hono';
import { HttpError } from './http-error.ts';

// Floods: a service keeps at most so many connections open and so many event streams held open (per service
// and per credential), and a client must send its headers and its body within a time limit (slowloris).
// Each refusal is an answer with a status and a sentence, never a silently dropped socket.

/** The limits of one service (config: MAX_CONNECTIONS, MAX_SSE_STREAMS …). */
export interface FloodLimits {
  maxConnections: number;
  maxStreams: number;
  maxStreamsPerCredential: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
}

export const DEFAULT_FLOOD_LIMITS: FloodLimits = {
  maxConnections: 2048,
  maxStreams: 256,
  maxStreamsPerCredential: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
};

/**
 * Caps the open connections of `server`: one past the cap is answered `503` with `Retry-After` and closed,
 * so the client learns why; the others go on. Header and request timeouts are Node's own (answered `408`).
 */
export function limitConnections(server: Server, limits: FloodLimits): void {
  const open = new Set<Socket>();
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.on('connection', (socket: Socket) => {
    if (open.size >= limits.maxConnections) {
      const body = JSON.stringify({
        error: `Too many open connections (MAX_CONNECTIONS=${limits.maxConnections}); retry shortly`,
      });
      socket.on('error', () => {});
      socket.end(
        'HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n' +
          `Connection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      socket.destroySoon();
      return;
    }
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
}

/** A request that will hold an event stream open: it asks for text/event-stream and not for JSON. */
function wantsStream(accept: string | undefined): boolean {
  if (!accept) return false;
  const a = accept.toLowerCase();
  return a.includes('text/event-stream') && !a.includes('application/json');
}

/**
 * Counts held-open event streams, per service and per credential (`local` without tokens): a stream past
 * either cap is refused with 429 naming the cap before the route runs; a stream is released when its
 * response ends, fails or is cancelled by the client.
 */
export function limitStreams(limits: FloodLimits): MiddlewareHandler {
  let total = 0;
  const byCredential = new Map<string, number>();
  return async (c, next) => {
    if (!wantsStream(c.req.header('accept'))) return next();
    const principal = c.get('principal');
    const key = principal && principal.role !== 'local' ? principal.credential : 'local';
    const mine = byCredential.get(key) ?? 0;
    if (total >= limits.maxStreams || mine >= limits.maxStreamsPerCredential) {
      const [cap, setting] =
        mine >= limits.maxStreamsPerCredential
          ? [limits.maxStreamsPerCredential, 'MAX_SSE_STREAMS_PER_CREDENTIAL']
          : [limits.maxStreams, 'MAX_SSE_STREAMS'];
      throw new HttpError(
        429,
        `Too many open event streams (${setting}=${cap}); close one or retry shortly`,
        {},
        { 'retry-after': '5' },
      );
    }
    total++;
    byCredential.set(key, mine + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      total--;
      const left = (byCredential.get(key) ?? 1) - 1;
      if (left <= 0) byCredential.delete(key);
      else byCredential.set(key, left);
    };
    try {
      await next();
    } catch (err) {
      release();
      throw err;
    }
    const body = c.res.body;
    if (!body || !(c.res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      release();
      return;
    }
    // Released when the stream ends, errors, or the client goes away (the body is cancelled).
    const reader = body.getReader();
    c.res = new Response(
      new ReadableStream<Uint8Array>({
        async pull(controller) {
          try {
            const { done, value } = await reader.read();
            if (done) {
              release();
              controller.close();
            } else controller.enqueue(value);
          } catch (err) {
            release();
            controller.error(err);
          }
        },
        cancel(reason) {
          release();
          return reader.cancel(reason);
        },
      }),
      c.res,
    );
  };
}
