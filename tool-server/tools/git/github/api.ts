import { ToolError } from '../../../kit/errors.ts';

// A small GitHub REST client for get_github_pull_request_info: one GET with a deadline, a response size
// cap, same-origin redirects only (the token never follows a redirect to another host), and every
// failure turned into a sentence the model can act on. The token never appears in what it returns.

/** The service's GitHub settings; absent fields take the defaults below. */
export interface GitHubSettings {
  /** REST API base (GitHub Enterprise: https://HOST/api/v3). */
  apiUrl?: string;
  /** Optional; without it GitHub allows 60 requests an hour and only public repositories. */
  token?: string;
  timeoutMs?: number;
  /** The fetch to use (tests pass their own); defaults to the global fetch at call time. */
  fetch?: typeof fetch;
}

/** Where the public GitHub's REST API lives. */
export const DEFAULT_GITHUB_API_URL = 'https://api.github.com';

/** Deadline of one GitHub request when the service does not set one. */
export const DEFAULT_GITHUB_TIMEOUT_MS = 15_000;

/** Largest response body read (a page of 100 files with patches fits). */
const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;
const MAX_REDIRECTS = 3;

/** A GET against the API; `what` names the resource in error messages ("pull request o/r#1"). */
export interface GitHubClient {
  get<T>(pathAndQuery: string, what: string): Promise<T>;
  /** The token-free text of `text` (every occurrence of the token replaced). */
  redact(text: string): string;
  readonly apiUrl: string;
  readonly authenticated: boolean;
}

/** Reads at most MAX_RESPONSE_BYTES of a body, stopping the stream beyond it. */
async function readCapped(res: Response, what: string): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_RESPONSE_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw new ToolError(`GitHub's answer for ${what} is larger than ${MAX_RESPONSE_BYTES} bytes; not read`);
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** GitHub's own error text (`message`), if the body has one. */
function messageOf(body: string): string {
  try {
    const parsed = JSON.parse(body) as { message?: unknown };
    if (typeof parsed.message === 'string') return parsed.message.slice(0, 300);
  } catch {
    // Not JSON: fall through to the raw text.
  }
  return body.trim().slice(0, 200) || 'no message';
}

/** The sentence for a non-2xx answer: what happened and what to do about it. */
function failure(res: Response, body: string, what: string, authenticated: boolean): string {
  const message = messageOf(body);
  const h = res.headers;
  const tokenHint = authenticated
    ? ''
    : ' Set GITHUB_TOKEN to raise the limit (5,000 requests an hour instead of 60).';
  if ((res.status === 403 || res.status === 429) && h.get('x-ratelimit-remaining') === '0') {
    const reset = Number(h.get('x-ratelimit-reset'));
    const when = Number.isFinite(reset) && reset > 0 ? new Date(reset * 1000) : null;
    const wait = when ? Math.max(0, Math.ceil((when.getTime() - Date.now()) / 1000)) : null;
    return (
      `GitHub API rate limit exhausted (${h.get('x-ratelimit-used') ?? '?'} of ${h.get('x-ratelimit-limit') ?? '?'} ` +
      `requests used${h.get('x-ratelimit-resource') ? `, resource ${h.get('x-ratelimit-resource')}` : ''})` +
      (when ? `; it resets at ${when.toISOString()} (in ${wait} s).` : '.') +
      tokenHint
    );
  }
  if ((res.status === 403 || res.status === 429) && h.get('retry-after')) {
    return `GitHub's secondary rate limit was hit while reading ${what}; retry after ${h.get('retry-after')} s. (${message})`;
  }
  if (res.status === 401) {
    return authenticated
      ? `GitHub rejected GITHUB_TOKEN (401 ${message}): the token is invalid, expired or revoked.`
      : `GitHub requires authentication for ${what} (401 ${message}); set GITHUB_TOKEN.`;
  }
  if (res.status === 403) {
    return (
      `GitHub refused access to ${what} (403 ${message}).` +
      (authenticated ? ' The token lacks the permission for it.' : ' Setting GITHUB_TOKEN may help.')
    );
  }
  if (res.status === 404) {
    return (
      `${what} was not found on GitHub (404). Check the owner, repository and number; a private repository ` +
      `also answers 404 when ${authenticated ? 'GITHUB_TOKEN cannot see it' : 'no GITHUB_TOKEN is set'}.`
    );
  }
  if (res.status >= 500)
    return `GitHub failed with ${res.status} while reading ${what} (${message}); try again later.`;
  return `GitHub answered ${res.status} for ${what}: ${message}`;
}

/** Builds the client for one call from the service's settings. */
export function githubClient(settings: GitHubSettings | undefined): GitHubClient {
  const apiUrl = (settings?.apiUrl ?? DEFAULT_GITHUB_API_URL).replace(/\/+$/, '');
  const token = settings?.token;
  const timeoutMs = settings?.timeoutMs ?? DEFAULT_GITHUB_TIMEOUT_MS;
  const origin = new URL(apiUrl).origin;
  const redact = (text: string) => (token ? text.split(token).join('[redacted]') : text);
  const headers: Record<string, string> = {
    accept: 'application/vnd.github+json',
    'x-github-api-version': '2022-11-28',
    'user-agent': 'toolshift',
  };
  if (token) headers.authorization = `Bearer ${token}`;

  async function get<T>(pathAndQuery: string, what: string): Promise<T> {
    const doFetch = settings?.fetch ?? globalThis.fetch;
    const signal = AbortSignal.timeout(timeoutMs);
    let url = `${apiUrl}${pathAndQuery}`;
    for (let hop = 0; ; hop++) {
      let res: Response;
      try {
        res = await doFetch(url, { headers, redirect: 'manual', signal });
      } catch (err) {
        const e = err as Error;
        if (e.name === 'TimeoutError' || signal.aborted) {
          throw new ToolError(`The GitHub API did not answer within ${timeoutMs} ms while reading ${what}`);
        }
        const cause = (e.cause as Error | undefined)?.message ?? e.message;
        throw new ToolError(redact(`Could not reach the GitHub API at ${apiUrl}: ${cause}`));
      }
      if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
        await res.body?.cancel().catch(() => undefined);
        const next = new URL(res.headers.get('location') ?? '', url);
        if (next.origin !== origin || hop >= MAX_REDIRECTS) {
          throw new ToolError(`GitHub redirected the request for ${what} to ${next.origin}; not followed`);
        }
        url = next.href;
        continue;
      }
      let body: string;
      try {
        body = await readCapped(res, what);
      } catch (err) {
        if (err instanceof ToolError) throw err;
        throw new ToolError(`The GitHub API did not finish its answer for ${what} within ${timeoutMs} ms`);
      }
      if (!res.ok) throw new ToolError(redact(failure(res, body, what, token !== undefined)));
      try {
        return JSON.parse(body) as T;
      } catch {
        throw new ToolError(`GitHub's answer for ${what} is not JSON (status ${res.status})`);
      }
    }
  }

  return { get, redact, apiUrl, authenticated: token !== undefined };
}
