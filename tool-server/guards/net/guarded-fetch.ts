import type { ReadableStream } from 'node:stream/web';
import { fetch } from 'undici';
import type { AllowList } from '../../../lib/net/allow-list.ts';
import { createGuardedDispatcher, type ProxyOptions } from '../../../lib/net/guarded-agent.ts';
import { NetRefusal, type Resolver, resolveChecked } from '../../../lib/net/resolve.ts';
import { ToolError } from '../../kit/errors.ts';
import { checkUrl, redact } from './url-policy.ts';

// One GET with the whole safety envelope: URL rules on every hop, redirects followed by hand (each target
// checked like the first URL), the address check in the connector, a byte cap counted on the decoded body while
// it streams, and one deadline over everything (DNS, connects, redirects, body).

/** Limits and dependencies of one guarded fetch. */
export interface GuardedFetchOptions {
  resolve: Resolver;
  allow: AllowList;
  timeoutMs: number;
  maxBytes: number;
  maxRedirects: number;
  userAgent: string;
  proxy?: ProxyOptions;
  /** Called with the final response's content type before the body is read; throw to refuse it unread. */
  accept?: (contentType: string) => void;
}

/** Why a body is incomplete: the byte cap, or the deadline arriving while it streamed. */
export type Cut = 'max_bytes' | 'deadline';

/** A fetched response: the decoded body (at most maxBytes), and where the redirects led. */
export interface FetchedBody {
  url: string;
  finalUrl: string;
  redirects: string[];
  status: number;
  contentType: string;
  body: Uint8Array;
  cut?: Cut;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** The end of every refusal of the address policy, naming the one way to open a door on purpose. */
const ALLOW_HINT =
  'fetch_url only connects to public unicast addresses (an operator can allow a host with FETCH_ALLOW_HOSTS)';

/** The setting fetch_url's allow-list is read from (parseAllowList names it in a refusal of an entry). */
export const FETCH_ALLOW_SETTING = 'FETCH_ALLOW_HOSTS';

/** Fetches `raw` under the guard; every failure is a ToolError that says what happened and to which URL. */
export async function guardedFetch(raw: string, opts: GuardedFetchOptions): Promise<FetchedBody> {
  try {
    return await fetchGuarded(raw, opts);
  } catch (err) {
    // The guard's refusal (lib/net) is one the model can act on.
    throw err instanceof NetRefusal ? new ToolError(err.message) : err;
  }
}

async function fetchGuarded(raw: string, opts: GuardedFetchOptions): Promise<FetchedBody> {
  const check = { resolve: opts.resolve, allow: opts.allow, hint: ALLOW_HINT };
  const first = checkUrl(raw);
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), opts.timeoutMs);
  const dispatcher = createGuardedDispatcher({
    ...check,
    connectTimeoutMs: opts.timeoutMs,
    proxy: opts.proxy,
  });
  const redirects: string[] = [];
  let url = first;
  try {
    for (;;) {
      // Checked here for an early, plain refusal (and as the only check a proxy leaves us); the connector
      // resolves and checks again, and only its answer is ever dialled.
      await withDeadline(resolveChecked(url.hostname, portOf(url), check), deadline.signal, opts, url);
      const res = await fetch(url, {
        dispatcher,
        redirect: 'manual',
        signal: deadline.signal,
        headers: { 'user-agent': opts.userAgent, accept: ACCEPT },
      }).catch((err: unknown) => {
        throw failure(err, deadline.signal, opts, url);
      });
      const location = res.headers.get('location');
      if (REDIRECTS.has(res.status) && location !== null) {
        await res.body?.cancel().catch(() => undefined);
        if (redirects.length >= opts.maxRedirects) {
          throw new ToolError(
            `Stopped after ${opts.maxRedirects} redirects (the limit); the chain was ${[first.href, ...redirects].join(' -> ')}`,
          );
        }
        url = checkUrl(location, url);
        redirects.push(url.href);
        continue;
      }
      const contentType = res.headers.get('content-type') ?? '';
      if (opts.accept) {
        try {
          opts.accept(contentType);
        } catch (err) {
          await res.body?.cancel().catch(() => undefined);
          throw err;
        }
      }
      const { body, cut } = await readCapped(res.body, opts.maxBytes, deadline.signal, url);
      return { url: first.href, finalUrl: url.href, redirects, status: res.status, contentType, body, cut };
    }
  } finally {
    clearTimeout(timer);
    await dispatcher.destroy().catch(() => undefined);
  }
}

const ACCEPT = 'text/html,application/xhtml+xml,application/json;q=0.9,text/*;q=0.8,*/*;q=0.5';

function portOf(url: URL): number {
  return Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
}

/** Reads a body until it ends, the cap is reached (the rest is never read) or the deadline passes. */
async function readCapped(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
  signal: AbortSignal,
  url: URL,
): Promise<{ body: Uint8Array; cut?: Cut }> {
  if (!body) return { body: new Uint8Array(0) };
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  let cut: Cut | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (total === maxBytes) {
        // The cap was reached exactly: anything more means the body is longer than we keep.
        if (value.byteLength > 0) {
          cut = 'max_bytes';
          break;
        }
        continue;
      }
      const take = Math.min(value.byteLength, maxBytes - total);
      chunks.push(take === value.byteLength ? value : value.subarray(0, take));
      total += take;
      if (take < value.byteLength) {
        cut = 'max_bytes';
        break;
      }
    }
  } catch (err) {
    if (!signal.aborted) {
      throw new ToolError(`Reading the body of ${redact(url)} failed after ${total} bytes: ${describe(err)}`);
    }
    cut = 'deadline';
  } finally {
    reader.cancel().catch(() => undefined);
  }
  return { body: concat(chunks, total), cut };
}

function concat(chunks: Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Races a step against the deadline, so a resolver that never answers cannot outlive it. */
async function withDeadline<T>(
  step: Promise<T>,
  signal: AbortSignal,
  opts: { timeoutMs: number },
  url: URL,
): Promise<T> {
  if (signal.aborted) throw deadlineError(opts, url);
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(deadlineError(opts, url));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([step, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

function deadlineError(opts: { timeoutMs: number }, url: URL): ToolError {
  return new ToolError(`No response from ${redact(url)} within ${opts.timeoutMs} ms (the fetch deadline)`);
}

/** Turns a rejected undici fetch into the error the model sees: the guard's own refusal, or a plain cause. */
function failure(err: unknown, signal: AbortSignal, opts: { timeoutMs: number }, url: URL): Error {
  if (signal.aborted) return deadlineError(opts, url);
  const cause = (err as { cause?: unknown }).cause ?? err;
  if (cause instanceof ToolError || cause instanceof NetRefusal) return cause;
  return new ToolError(`Could not fetch ${redact(url)}: ${describe(cause)}`);
}

const NET_WORDS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  UND_ERR_SOCKET: 'the connection closed unexpectedly',
  UND_ERR_HEADERS_OVERFLOW: 'the response headers are too large',
};

function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  const words = e?.code ? NET_WORDS[e.code] : undefined;
  if (words) return words;
  const message = e instanceof Error ? e.message : String(err);
  return e?.code ? `${message} (${e.code})` : message;
}
