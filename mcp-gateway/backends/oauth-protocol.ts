import { boundedFetch } from '../../lib/http/bounded-fetch.ts';
import { parseAllowList } from '../../lib/net/allow-list.ts';
import { resolveChecked, systemResolver } from '../../lib/net/resolve.ts';

// The gateway as an OAuth client of an upstream MCP server (the MCP authorization specification): where its
// authorization server is (RFC 9728, then RFC 8414 metadata), registering with it (RFC 7591), and the token
// endpoint's exchanges (authorization code with PKCE, refresh, RFC 7009 revocation). The SDK's client helpers do
// the same steps, but trust what the metadata says; here every answer is bounded and checked — the metadata
// names the issuer that was advertised, every endpoint is on the issuer's host, nothing redirects, and an upstream
// that is not on loopback gets no endpoint on a private address — and refused with the reason.

/** An answer of the authorization server: at most this long and this large. */
const BOUNDS = { timeoutMs: 10_000, maxBytes: 64 * 1024 };
const fetchBounded = boundedFetch(BOUNDS);

/** What the gateway uses of an authorization server's metadata, checked. */
export interface ServerMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  registration_endpoint?: string;
  revocation_endpoint?: string;
}

/** The gateway's client at that server: registered (RFC 7591) or configured in the toolset file. */
export interface OAuthClient {
  client_id: string;
  client_secret?: string;
}

/** A token endpoint's answer, as kept (sealed) in the grant. */
export interface Tokens {
  access_token: string;
  refresh_token?: string;
  /** ms since the epoch. */
  expires_at: number | null;
  /** The scopes granted, when the server said (else those asked for). */
  scope?: string;
}

/** The authorization server refused or answered what the gateway does not take: its message is safe to show. */
export class OAuthError extends Error {
  /** The grant is no longer any good (invalid_grant): the person connects again. */
  readonly lost: boolean;
  constructor(message: string, lost = false) {
    super(message);
    this.name = new.target.name;
    this.lost = lost;
  }
}

const NO_HOSTS = parseAllowList([], 'none');

/** Refuses a URL that is not http(s), or (for an upstream off loopback) one whose host resolves to a private address. */
async function checkUrl(url: string, what: string, loopbackAllowed: boolean): Promise<URL> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new OAuthError(`the authorization server's ${what} is not a URL`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') {
    throw new OAuthError(`the authorization server's ${what} is not http(s): ${u.protocol}`);
  }
  if (u.protocol === 'http:' && !loopbackAllowed) {
    throw new OAuthError(`the authorization server's ${what} must be https (${u.origin})`);
  }
  if (!loopbackAllowed) {
    const port = Number(u.port) || (u.protocol === 'https:' ? 443 : 80);
    await resolveChecked(u.hostname, port, {
      resolve: systemResolver,
      allow: NO_HOSTS,
      hint: 'an upstream off loopback has its authorization server on public addresses only',
    }).catch((err: Error) => {
      throw new OAuthError(`the authorization server's ${what} is refused: ${err.message}`);
    });
  }
  return u;
}

/** GETs or POSTs `url` and reads its JSON; anything else (a redirect, a huge or slow answer) is refused. */
async function json(url: string, what: string, init?: RequestInit): Promise<Record<string, unknown>> {
  let res: Response;
  try {
    res = await fetchBounded(url, { ...init, headers: { accept: 'application/json', ...init?.headers } });
  } catch (err) {
    const e = err as Error;
    const why = e.name === 'TimeoutError' ? `no answer in ${BOUNDS.timeoutMs / 1000} s` : e.message;
    throw new OAuthError(`${what} at ${new URL(url).origin} failed: ${why}`);
  }
  if (res.status >= 300 && res.status < 400) {
    throw new OAuthError(
      `${what} at ${new URL(url).origin} redirected (${res.status}); redirects are not followed`,
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(await res.text());
  } catch {
    throw new OAuthError(`${what} at ${new URL(url).origin} answered ${res.status} without JSON`);
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw new OAuthError(`${what} at ${new URL(url).origin} answered ${res.status} with no JSON object`);
  }
  const b = body as Record<string, unknown>;
  if (!res.ok) {
    const error = typeof b.error === 'string' ? b.error.slice(0, 100) : `HTTP ${res.status}`;
    const detail = typeof b.error_description === 'string' ? `: ${b.error_description.slice(0, 300)}` : '';
    throw new OAuthError(`${what} was refused (${error}${detail})`, error === 'invalid_grant');
  }
  return b;
}

/** The well-known URLs of a document for `url` (RFC 8414 §3: inserted before the path), then at the root. */
function wellKnown(url: URL, name: string): string[] {
  const at = `${url.origin}/.well-known/${name}`;
  const path = url.pathname.replace(/\/$/, '');
  return path ? [`${at}${path}`, at] : [at];
}

async function firstOf(urls: string[], what: string): Promise<Record<string, unknown>> {
  let last: unknown;
  for (const url of urls) {
    try {
      return await json(url, what);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}

/**
 * The authorization server of the MCP server at `resource`, from its protected resource metadata (RFC 9728) and
 * then the server's own (RFC 8414, or OpenID discovery), checked.
 */
export async function discover(resource: string): Promise<ServerMetadata> {
  const res = new URL(resource);
  const loopback = isLoopback(res.hostname);
  const prm = await firstOf(wellKnown(res, 'oauth-protected-resource'), 'the protected resource metadata');
  const servers = prm.authorization_servers;
  if (!Array.isArray(servers) || typeof servers[0] !== 'string') {
    throw new OAuthError(`${resource} names no authorization server (authorization_servers) in its metadata`);
  }
  const issuer = servers[0];
  const iss = await checkUrl(issuer, 'issuer', loopback);
  const meta = await firstOf(
    [
      ...wellKnown(iss, 'oauth-authorization-server'),
      `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`,
    ],
    'the authorization server metadata',
  );
  if (meta.issuer !== issuer) {
    throw new OAuthError(
      `the authorization server metadata names issuer ${String(meta.issuer).slice(0, 200)}, not ${issuer} that ${resource} advertised`,
    );
  }
  const methods = meta.code_challenge_methods_supported;
  if (Array.isArray(methods) && !methods.includes('S256')) {
    throw new OAuthError(`the authorization server ${issuer} does not take PKCE with S256`);
  }
  const out: Record<string, string> = { issuer };
  for (const key of [
    'authorization_endpoint',
    'token_endpoint',
    'registration_endpoint',
    'revocation_endpoint',
  ]) {
    const value = meta[key];
    if (value === undefined) continue;
    if (typeof value !== 'string') throw new OAuthError(`the authorization server's ${key} is not a string`);
    const u = await checkUrl(value, key, loopback);
    if (u.host !== iss.host) {
      throw new OAuthError(
        `the authorization server's ${key} is on ${u.host}, not on the issuer's host ${iss.host}`,
      );
    }
    out[key] = value;
  }
  if (!out.authorization_endpoint || !out.token_endpoint) {
    throw new OAuthError(
      `the authorization server ${issuer} names no authorization_endpoint or token_endpoint`,
    );
  }
  return out as unknown as ServerMetadata;
}

const isLoopback = (host: string) =>
  host === 'localhost' || /^127\./.test(host) || host === '[::1]' || host === '::1';

/** Registers the gateway at the server (RFC 7591) for `redirectUri`: a public client, PKCE and refresh. */
export async function register(meta: ServerMetadata, redirectUri: string): Promise<OAuthClient> {
  if (!meta.registration_endpoint) {
    throw new OAuthError(
      `the authorization server ${meta.issuer} takes no dynamic registration: give oauth.client_id in the toolset file`,
    );
  }
  const body = await json(meta.registration_endpoint, 'the client registration', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'toolshift gateway',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  if (typeof body.client_id !== 'string') throw new OAuthError('the client registration gave no client_id');
  return {
    client_id: body.client_id,
    ...(typeof body.client_secret === 'string' ? { client_secret: body.client_secret } : {}),
  };
}

/** The URL the person is sent to, to consent. */
export function authorizationUrl(
  meta: ServerMetadata,
  client: OAuthClient,
  p: { redirectUri: string; scopes: string[]; state: string; challenge: string; resource: string },
): string {
  const url = new URL(meta.authorization_endpoint);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', client.client_id);
  url.searchParams.set('redirect_uri', p.redirectUri);
  if (p.scopes.length > 0) url.searchParams.set('scope', p.scopes.join(' '));
  url.searchParams.set('state', p.state);
  url.searchParams.set('code_challenge', p.challenge);
  url.searchParams.set('code_challenge_method', 'S256');
  url.searchParams.set('resource', p.resource);
  return url.href;
}

/** A token request (a code's exchange, or a refresh) with the client's credentials. */
export async function tokenRequest(
  tokenEndpoint: string,
  client: OAuthClient,
  params: Record<string, string>,
  now = Date.now(),
): Promise<Tokens> {
  const form = new URLSearchParams({ ...params, client_id: client.client_id });
  if (client.client_secret) form.set('client_secret', client.client_secret);
  const b = await json(tokenEndpoint, 'the token request', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form.toString(),
  });
  if (typeof b.access_token !== 'string' || b.access_token === '') {
    throw new OAuthError('the token endpoint answered without an access_token');
  }
  const lifetime = typeof b.expires_in === 'number' && b.expires_in > 0 ? b.expires_in * 1000 : null;
  return {
    access_token: b.access_token,
    ...(typeof b.refresh_token === 'string' ? { refresh_token: b.refresh_token } : {}),
    expires_at: lifetime === null ? null : now + lifetime,
    ...(typeof b.scope === 'string' ? { scope: b.scope } : {}),
  };
}

/** Asks the server to revoke `token` (RFC 7009); its failure is the caller's to report, never to keep the grant. */
export async function revokeToken(
  revocationEndpoint: string,
  client: OAuthClient,
  token: string,
  hint: 'refresh_token' | 'access_token',
): Promise<void> {
  const form = new URLSearchParams({ token, token_type_hint: hint, client_id: client.client_id });
  if (client.client_secret) form.set('client_secret', client.client_secret);
  const res = await fetchBounded(revocationEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form.toString(),
  });
  if (!res.ok)
    throw new OAuthError(`the revocation at ${new URL(revocationEndpoint).origin} answered ${res.status}`);
}
