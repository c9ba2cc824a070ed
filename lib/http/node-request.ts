import { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import { HttpError } from './http-error.ts';

/** The Node request behind a context, when served by @hono/node-server (absent with app.request). */
export function incomingOf(c: Context): IncomingMessage | undefined {
  const env = c.env as { incoming?: unknown } | undefined;
  return env?.incoming instanceof IncomingMessage ? env.incoming : undefined;
}

/**
 * A request's body as text, at most `maxBytes`. Served by Node, it is read straight from the socket's stream:
 * building the WHATWG Request and its ReadableStream was the largest share of a service-to-service call's
 * server side. The limit applies as it is read (a body without Content-Length); installBase() has checked a
 * declared one.
 */
export async function bodyText(c: Context, maxBytes: number): Promise<string> {
  const incoming = incomingOf(c);
  const tooLarge = () => new HttpError(413, `Request body is larger than ${maxBytes} bytes`);
  if (!incoming || incoming.readableEnded || incoming.readableDidRead) {
    const text = await c.req.text();
    if (Buffer.byteLength(text) > maxBytes) throw tooLarge();
    return text;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of incoming as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString('utf8');
}
