import { ToolError } from '../../kit/errors.ts';

// Brave Search's error answers, turned into messages a model can act on: a bad key (say so, do not retry), a
// bad request (name the field), a rate or quota limit (say when to retry). Brave's error body is
// {"type": "ErrorResponse", "error": {id, status, code, detail, meta}} (older documentation shows an
// "errors" array; both are read). A bad key is reported as 401 or as 422 with SUBSCRIPTION_TOKEN_INVALID.

interface BraveError {
  code?: string;
  detail?: string;
  fields: string[];
}

/** Replaces every occurrence of the key in a message, in case an upstream ever echoes it. */
export function redactKey(message: string, key: string): string {
  return key.length >= 4 ? message.split(key).join('[redacted]') : message;
}

/** The ToolError for a non-2xx answer from Brave. */
export async function braveFailure(res: Response, key: string): Promise<ToolError> {
  const err = parseError(await res.text().catch(() => ''));
  const label = `HTTP ${res.status}${err.code ? ` ${err.code}` : ''}${err.detail ? `: ${err.detail}` : ''}`;
  let message: string;
  if (res.status === 401 || res.status === 403 || err.code?.startsWith('SUBSCRIPTION_TOKEN')) {
    message =
      `Brave Search rejected the API key (${label}). Check BRAVE_API_KEY in the tool-server's environment; ` +
      'retrying with the same key will not help.';
  } else if (res.status === 429 || err.code === 'RATE_LIMITED' || err.code === 'QUOTA_LIMITED') {
    const wait = retryAfterSeconds(res.headers);
    const when = wait === undefined ? 'retry later' : `retry after ${wait} s${roughly(wait)}`;
    const what = err.code === 'QUOTA_LIMITED' ? "the plan's quota is used up" : 'too many requests';
    message = `Brave Search rate limit reached: ${what} (${label}); ${when}.`;
  } else if (res.status === 422 || res.status === 400 || err.code === 'VALIDATION') {
    const fields = err.fields.length > 0 ? ` [${err.fields.join('; ')}]` : '';
    message =
      `Brave Search refused the request (${label})${fields}. Change the arguments: query 1-400 characters and ` +
      'at most 50 words, count 1-20, offset 0-9.';
  } else if (res.status >= 500) {
    message = `Brave Search failed (${label}); try again in a moment.`;
  } else {
    message = `Brave Search answered ${label}.`;
  }
  return new ToolError(redactKey(message, key));
}

function parseError(text: string): BraveError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { fields: [] };
  }
  const b = body as { error?: unknown; errors?: unknown[] };
  const e = (b.error ?? b.errors?.[0] ?? {}) as {
    code?: unknown;
    detail?: unknown;
    meta?: { errors?: Array<{ loc?: unknown[]; msg?: unknown }> };
  };
  const fields = (Array.isArray(e.meta?.errors) ? e.meta.errors : []).slice(0, 5).map((f) => {
    const loc = Array.isArray(f.loc) ? f.loc.map(String).join('.') : '';
    return `${loc}${loc ? ': ' : ''}${String(f.msg ?? 'invalid').slice(0, 200)}`;
  });
  return {
    code: typeof e.code === 'string' ? e.code.slice(0, 64) : undefined,
    detail: typeof e.detail === 'string' ? e.detail.slice(0, 300) : undefined,
    fields,
  };
}

/**
 * Seconds until a retry can work: Retry-After when sent (seconds or a date), otherwise Brave's
 * X-RateLimit-Reset ("1, 1419704": per-second window, per-month window) for the windows with nothing left.
 */
export function retryAfterSeconds(headers: Headers): number | undefined {
  const retryAfter = headers.get('retry-after');
  if (retryAfter !== null) {
    const seconds = Number(retryAfter);
    if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds);
    const date = Date.parse(retryAfter);
    if (!Number.isNaN(date)) return Math.max(0, Math.ceil((date - Date.now()) / 1000));
  }
  const resets = numbers(headers.get('x-ratelimit-reset'));
  if (resets.length === 0) return undefined;
  const remaining = numbers(headers.get('x-ratelimit-remaining'));
  const exhausted = resets.filter((_, i) => remaining[i] === 0);
  return exhausted.length > 0 ? Math.max(...exhausted) : Math.min(...resets);
}

function numbers(header: string | null): number[] {
  if (!header) return [];
  return header
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isFinite(n) && n >= 0);
}

function roughly(seconds: number): string {
  if (seconds < 120) return '';
  if (seconds < 7200) return ` (about ${Math.round(seconds / 60)} minutes)`;
  if (seconds < 172_800) return ` (about ${Math.round(seconds / 3600)} hours)`;
  return ` (about ${Math.round(seconds / 86_400)} days)`;
}
