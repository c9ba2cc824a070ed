import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import Provider, { type ClientMetadata } from 'oidc-provider';

// A real OpenID provider and OAuth 2.1 authorization server (oidc-provider, the certified implementation) on a
// loopback port, for the console's sign-in and /mcp as a protected resource: its own clients (`clients`) and
// dynamic client registration, PKCE (its default for public clients), resource indicators giving JWT access
// tokens whose audience is the resource, and its development login and consent pages, driven here by fetch with a
// cookie jar (no browser). Its people are the test's; their claims go into the access tokens.

/** A person the server knows, by login: the claims their tokens carry (email, email_verified, groups…). */
export type Person = Record<string, unknown>;

export interface AuthorizationServer {
  issuer: string;
  /** Signs a token with the server's own key (`key: 'other'`: a key of nobody's) for claims the test chooses. */
  mint(claims: JWTPayload, opts?: { key?: 'own' | 'other' }): Promise<string>;
  /** Signs `login` in at `authorizationUrl` (the login page, then consent): the parameters sent to `redirect`. */
  signIn(authorizationUrl: URL, login: string, redirect: string): Promise<URLSearchParams>;
  /** Stops the server. */
  close(): Promise<void>;
}

const KID = 'test-signing-key';

/**
 * For an upstream MCP server as the resource: the scopes its tokens may carry, their lifetime (s), and refresh
 * tokens for every client that registered for them (without offline_access, which is OpenID's).
 */
export interface ResourceOptions {
  scopes?: string[];
  accessTokenTTL?: number;
  refresh?: boolean;
}

/** Starts the server on 127.0.0.1 with `people` (logins to claims) and its registered `clients`. */
export async function startAuthorizationServer(
  people: Record<string, Person>,
  clients: ClientMetadata[] = [],
  resource: ResourceOptions = {},
): Promise<AuthorizationServer> {
  const resourceScopes = resource.scopes ?? ['mcp'];
  const own = await generateKeyPair('RS256', { extractable: true });
  const other = await generateKeyPair('RS256', { extractable: true });
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [{ ...(await exportJWK(own.privateKey)), kid: KID, alg: 'RS256', use: 'sig' }] },
    cookies: { keys: ['authorization-server-test-cookies'] },
    scopes: ['openid', 'offline_access', ...resourceScopes],
    ...(resource.refresh
      ? {
          issueRefreshToken: (_ctx: unknown, client: { grantTypeAllowed(t: string): boolean }) =>
            client.grantTypeAllowed('refresh_token'),
        }
      : {}),
    claims: { email: ['email', 'email_verified'], profile: ['preferred_username', 'name', 'groups'] },
    features: {
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        // Any resource the client names: its tokens are JWTs with that audience.
        getResourceServerInfo: (_ctx, resourceIndicator) => ({
          scope: resourceScopes.join(' '),
          audience: resourceIndicator,
          accessTokenTTL: resource.accessTokenTTL ?? 300,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    findAccount: (_ctx, id) =>
      people[id] ? { accountId: id, claims: () => ({ sub: id, ...people[id] }) } : undefined,
    // The person's email in the access token: the gateway reads who they are from it.
    extraTokenClaims: (_ctx, token) =>
      'accountId' in token && typeof token.accountId === 'string' ? people[token.accountId] : undefined,
  });
  server.on('request', provider.callback());
  return {
    issuer,
    mint: (claims, opts = {}) =>
      new SignJWT({ iss: issuer, ...claims })
        .setProtectedHeader({ alg: 'RS256', kid: KID, typ: 'at+jwt' })
        .sign(opts.key === 'other' ? other.privateKey : own.privateKey),
    signIn: (authorizationUrl, login, redirect) => drive(authorizationUrl, login, redirect),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

/** Follows the server's redirects, fills its login and consent forms, and stops at the redirect to the client. */
async function drive(authorizationUrl: URL, login: string, redirect: string): Promise<URLSearchParams> {
  const jar = new Map<string, string>();
  let url = authorizationUrl.href;
  let form: URLSearchParams | undefined;
  for (let step = 0; step < 20; step++) {
    const res = await fetch(url, {
      method: form ? 'POST' : 'GET',
      redirect: 'manual',
      headers: {
        cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body: form?.toString(),
    });
    for (const cookie of res.headers.getSetCookie()) {
      const pair = cookie.split(';')[0];
      const [name, value] = [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)];
      if (value === '') jar.delete(name);
      else jar.set(name, value);
    }
    const location = res.headers.get('location');
    const page = await res.text();
    if (location) {
      const next = new URL(location, url);
      if (next.href.startsWith(redirect)) {
        if (!next.searchParams.has('code'))
          throw new Error(`the authorization server sent no code: ${next.search}`);
        return next.searchParams;
      }
      [url, form] = [next.href, undefined];
      continue;
    }
    const prompt = /name="prompt" value="(\w+)"/.exec(page)?.[1];
    const action = /<form[^>]* action="([^"]+)"/.exec(page)?.[1];
    if (res.status !== 200 || !prompt || !action) {
      throw new Error(`${url} answered ${res.status} without a form: ${page.slice(0, 800)}`);
    }
    form = new URLSearchParams(prompt === 'login' ? { prompt, login, password: 'any' } : { prompt });
    url = new URL(action.replaceAll('&amp;', '&'), url).href;
  }
  throw new Error('the sign-in did not end in 20 steps');
}
