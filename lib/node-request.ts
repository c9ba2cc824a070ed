import { IncomingMessage } from 'node:http';
import type { Context } from 'hono';

/** The Node request behind a context, when served by @hono/node-server (absent with app.request). */
export function incomingOf(c: Context): IncomingMessage | undefined {
  const env = c.env as { incoming?: unknown } | undefined;
  return env?.incoming instanceof IncomingMessage ? env.incoming : undefined;
}
