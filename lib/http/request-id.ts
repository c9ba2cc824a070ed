import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

// The id of the request being served, carried across the three services: accepted from `x-request-id`,
// generated when absent, echoed back, put on every log line, and sent on to the next service. A task started
// by a request keeps that request's id for its whole life (async context follows the task's promises).

/** The header that carries it. */
export const REQUEST_ID_HEADER = 'x-request-id';

const context = new AsyncLocalStorage<string>();

/** What an accepted id may look like: short, printable, no spaces (it lands in logs and headers). */
const VALID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** The id to use for a request: the caller's when it is well-formed, a fresh one otherwise. */
export function requestIdFrom(header: string | undefined): string {
  const given = header?.trim();
  return given && VALID.test(given) ? given : randomUUID();
}

/** Runs `fn` with `id` as the current request id (for everything it awaits and starts). */
export function withRequestId<T>(id: string, fn: () => T): T {
  return context.run(id, fn);
}

/** The current request id, if code is running on behalf of a request. */
export function currentRequestId(): string | undefined {
  return context.getStore();
}
