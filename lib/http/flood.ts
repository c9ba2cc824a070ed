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

/** A request that asks for an event stream and not for JSON: its slot is taken before the route runs. */
function wantsStream(accept: string | undefined): boolean {
  if (!accept) return false;
  const a = accept.toLowerCase();
  return a.includes('text/event-stream') && !a.includes('application/json');
}

/** The per-service and per-credential counts of held-open event streams. */
function streamCounter(limits: FloodLimits) {
  let total = 0;
  const byCredential = new Map<string, number>();
  return {
    /** Why a new stream of `key` is refused (the cap and its setting), or undefined when there is room. */
    full(key: string): string | undefined {
      if ((byCredential.get(key) ?? 0) >= limits.maxStreamsPerCredential) {
        return `MAX_SSE_STREAMS_PER_CREDENTIAL=${limits.maxStreamsPerCredential}`;
      }
      if (total >= limits.maxStreams) return `MAX_SSE_STREAMS=${limits.maxStreams}`;
      return undefined;
    },
    /** Takes a slot; the returned function gives it back (once, however often it is called). */
    take(key: string): () => void {
      total++;
      byCredential.set(key, (byCredential.get(key) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total--;
        const left = (byCredential.get(key) ?? 1) - 1;
        if (left <= 0) byCredential.delete(key);
        else byCredential.set(key, left);
      };
    },
  };
}

function tooManyStreams(cap: string): HttpError {
  return new HttpError(
    429,
    `Too many open event streams (${cap}); close one or retry shortly`,
    {},
    { 'retry-after': '5' },
  );
}

/**
 * Counts held-open event streams, per service and per credential (`local` without tokens). A request that asks
 * only for a stream is refused with 429 naming the cap before the route runs. A GET answered with a stream
 * whatever its Accept said (task events asked for with no Accept, `GET /mcp` asking for JSON too) is counted
 * by its answer: past a cap the stream is cancelled before a byte of it is sent and the client gets the same
 * 429, so leaving Accept out does not get round the cap. A POST answered with a stream it did not ask for
 * alone (an MCP request, a task started with `Accept: text/event-stream, application/json`) has already done
 * its work and is not refused; it is still counted while it stays open, so it takes its place against the
 * caps. A slot is released when the stream ends, fails or is cancelled by the client.
 */
export function limitStreams(limits: FloodLimits): MiddlewareHandler {
  const streams = streamCounter(limits);
  return async (c, next) => {
    const principal = c.get('principal');
    const key = principal && principal.role !== 'local' ? principal.credential : 'local';
    let release: (() => void) | undefined;
    if (wantsStream(c.req.header('accept'))) {
      const cap = streams.full(key);
      if (cap) throw tooManyStreams(cap);
      release = streams.take(key);
    }
    try {
      await next();
    } catch (err) {
      release?.();
      throw err;
    }
    const body = c.res.body;
    if (!body || !(c.res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      release?.();
      return;
    }
    if (!release) {
      const cap = c.req.method === 'GET' ? streams.full(key) : undefined;
      if (cap) {
        // Nothing of it was sent yet: cancelling ends the route's stream (its finally blocks run).
        void body.cancel().catch(() => {});
        throw tooManyStreams(cap);
      }
      release = streams.take(key);
    }
    const done = release;
    // Released when the stream ends, errors, or the client goes away (the body is cancelled).
    const reader = body.getReader();
    c.res = new Response(
      new ReadableStream<Uint8Array>({
        async pull(controller) {
          try {
            const { done: ended, value } = await reader.read();
            if (ended) {
              done();
              controller.close();
            } else controller.enqueue(value);
          } catch (err) {
            done();
            controller.error(err);
          }
        },
        cancel(reason) {
          done();
          return reader.cancel(reason);
        },
      }),
      c.res,
    );
  };
}
