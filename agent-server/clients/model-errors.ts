import { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import { type Failure, StreamFailure } from './model-stream.ts';

// How a failed model call is judged, whatever the API (chat completions, Responses): whether to retry, how long
// to wait (Retry-After), what to tell the user (the endpoint, the provider's message, the key or URL to check),
// and what it says of the endpoint's state (/health). The retry loop itself is model.ts's `retryingModel`.

const RETRYABLE = new Set([408, 409, 429]);
/** The longest wait between attempts, asked for or not. */
export const MAX_DELAY_MS = 60_000;

/** The delay a 429/503 asks for, from `retry-after-ms` or `retry-after` (seconds or an HTTP date). */
export function retryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (headers?.get('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return Math.min(ms, MAX_DELAY_MS);
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, MAX_DELAY_MS);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.min(Math.max(0, date - Date.now()), MAX_DELAY_MS);
}

/** The network error under an SDK connection error: its code and its message (ECONNREFUSED, ENOTFOUND …). */
function networkCause(err: unknown): { code?: string; message?: string } {
  let cause = (err as { cause?: unknown }).cause;
  for (let depth = 0; cause && depth < 4; depth++) {
    const { code, message } = cause as { code?: unknown; message?: unknown };
    if (typeof code === 'string') return { code, message: typeof message === 'string' ? message : undefined };
    cause = (cause as { cause?: unknown }).cause;
  }
  const message = (err as { cause?: { message?: unknown } }).cause?.message;
  return { message: typeof message === 'string' && message ? message : undefined };
}

/** OpenSSL's `…:SSL routines:ssl3_get_record:wrong version number:…` as `wrong version number`; others trimmed. */
function plainMessage(message: string | undefined): string | undefined {
  if (!message) return undefined;
  const ssl = /SSL routines:[^:]*:([^:]+)/.exec(message);
  return (ssl ? ssl[1] : message).trim().split('\n')[0];
}

/** Codes of a TLS failure: the handshake, or a certificate Node does not trust. */
function isTlsError(code: string): boolean {
  return /^(ERR_SSL_|ERR_TLS_|EPROTO$)|CERT|_SIGNATURE$|SELF_SIGNED|^UNABLE_TO_/.test(code);
}

/** An SDK's error for an answer that was not 2xx (the `openai` and `@anthropic-ai/sdk` ones have one shape). */
export interface SdkApiError extends Error {
  status: number | undefined;
  headers: Headers | undefined;
  code?: unknown;
  type?: unknown;
}

/** A provider SDK's error classes. */
export interface SdkErrors {
  APIError: abstract new (...args: never[]) => SdkApiError;
  APIConnectionError: abstract new (...args: never[]) => Error;
  APIConnectionTimeoutError: abstract new (...args: never[]) => Error;
}

/** A provider's settings, for the messages (lib/config/config.ts), and what its answers say of a spent quota. */
export interface ProviderWords {
  key: string;
  url: string;
  /** An answer waiting does not fix (no quota or credit left): failed at once with the provider's message. */
  quota(err: SdkApiError, text: string): boolean;
  /** What the error body said, where the provider's body has its own shape (providerText otherwise). */
  text?(err: SdkApiError): string;
}

/** What a provider's error body said, without the status the SDK puts in front of it (often more than once). */
export function providerText(err: SdkApiError): string {
  const status = String(err.status);
  let text = err.message;
  // The SDK's message is `<status> <provider message>`; a provider's own message may start with it again
  // ("401 Unauthorized"), and one without a body reads `<status> status code (no body)`.
  while (text.startsWith(status)) text = text.slice(status.length).trim();
  if (text === '' || text === 'status code (no body)') return 'no message';
  // `{"error": "Unauthorized"}`: the SDK quotes the string.
  if (/^"[^"]*"$/.test(text)) text = text.slice(1, -1);
  // An HTML error page (a proxy's): its title, not its markup.
  if (/^<(!doctype|html|head|body)/i.test(text)) {
    const title = /<title>([^<]*)<\/title>/i.exec(text)?.[1]?.trim();
    text = title ? title.replace(new RegExp(`^${status}\\s*`), '') || title : 'an HTML page';
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** Statuses about the one request (its size, its content): the endpoint itself works. */
const REQUEST_ERRORS = new Set([400, 413, 422]);

/**
 * What a failed attempt was — an SDK error, a stream failure, anything else (not retried) — for a provider's
 * SDK and settings.
 */
export function describer(sdk: SdkErrors, words: ProviderWords) {
  return (err: unknown, timeoutMs: number, endpoint: string, keySet: boolean): Failure => {
    if (err instanceof StreamFailure) return err.failure;
    if (err instanceof sdk.APIError && err.status !== undefined) {
      const text = words.text ? words.text(err) : providerText(err);
      const quota = words.quota(err, text);
      const retry = !quota && (RETRYABLE.has(err.status) || err.status >= 500);
      const key =
        err.status === 401 || err.status === 403
          ? keySet
            ? ` (the endpoint refused the API key in ${words.key}: check it, and that it may use this model)`
            : ` (no API key was sent: set ${words.key})`
          : '';
      return {
        retry,
        message: `model endpoint ${endpoint} answered ${err.status}: ${text}${key}`,
        delay: retryAfterMs(err.headers),
        status: err.status,
        state: REQUEST_ERRORS.has(err.status) && !quota ? 'ok' : 'error',
      };
    }
    if (err instanceof sdk.APIConnectionError) return unreachable(err, sdk, words, timeoutMs, endpoint);
    return { retry: false, state: 'error', message: (err as Error).message };
  };
}

/** A connection that failed or timed out: which, and what to check. */
function unreachable(
  err: Error,
  sdk: SdkErrors,
  words: ProviderWords,
  timeoutMs: number,
  endpoint: string,
): Failure {
  if (err instanceof sdk.APIConnectionTimeoutError) {
    return {
      retry: true,
      state: 'unreachable',
      message: `model call to ${endpoint} timed out after ${timeoutMs} ms (AGENT_MODEL_TIMEOUT_MS)`,
    };
  }
  const { code, message } = networkCause(err);
  const said = plainMessage(message);
  // (Typed as any Error, so TypeScript would take the timeout's test above to have ruled every error out.)
  const cause = code ? (said && said !== code ? `${code}: ${said}` : code) : (said ?? (err as Error).message);
  return {
    retry: true,
    state: 'unreachable',
    message:
      code && isTlsError(code)
        ? `the TLS connection to the model endpoint ${endpoint} failed (${cause}): does the server speak ` +
          `https (${words.url} may need http://), and is its certificate trusted (NODE_EXTRA_CA_CERTS)?`
        : `cannot reach the model endpoint ${endpoint} (${cause}): is the server running, and is ${words.url} right?`,
  };
}

/** The `openai` SDK's failures: an exhausted quota is a 429 that waiting does not fix. */
export const describe = describer(
  { APIError, APIConnectionError, APIConnectionTimeoutError },
  {
    key: 'OPENAI_API_KEY',
    url: 'OPENAI_BASE_URL',
    quota: (err) => err.code === 'insufficient_quota' || (err.type ?? '') === 'insufficient_quota',
  },
);
