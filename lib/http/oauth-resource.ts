import type { Context } from 'hono';
import {
  createRemoteJWKSet,
  customFetch,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import type { SignInRule } from '../config/sign-in.ts';
import type { IdentityStore } from '../identity/store.ts';
import { boundedFetch } from './bounded-fetch.ts';
import { HttpError } from './http-error.ts';

// The gateway's MCP endpoint as an OAuth 2.1 protected resource (the MCP authorization specification): its
// metadata (RFC 9728) names the operator's authorization server, a 401 on it points there, and an access token that
// server signed for this endpoint (a JWT whose audience is the endpoint) acts for the person it names, a user here
// by the sign-in rule (lib/identity/sign-in.ts). The gateway only checks tokens: it is no authorization server.

/** /mcp as a protected resource (MCP_OAUTH_RESOURCE, its issuer, the sign-in rule); mcpOAuth() builds it. */
export interface McpOAuth {
  resource: string;
  issuer: string;
  rule: SignInRule;
  /** The authorization server's signing keys, found through its metadata once, again after a failure. */
  keys: () => Promise<JWTVerifyGetKey>;
}

/** What stands for a key's id in the holder of a request made with an access token (messages, the audit). */
export const OAUTH_VIA = 'oauth';

/** How long a request to the authorization server (metadata, keys) may take, and how much it may send. */
const FETCH_TIMEOUT_MS = 5_000;
const MAX_DOCUMENT_BYTES = 256 * 1024;
/** Access tokens are signed by the authorization server's private key: never HS256 with a shared secret, nor none. */
const ASYMMETRIC = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

/**
 * Where an OAuth-capable client (mcp-remote, the MCP Inspector, SDK clients given an OAuth provider) looks
 * when it meets a 401: protected-resource metadata (RFC 9728), authorization-server metadata (RFC 8414,
 * OpenID), and, without metadata, the /register, /authorize and /token defaults.
 */
export function isOAuthPath(path: string): boolean {
  return (
    /^\/\.well-known\/(oauth-protected-resource|oauth-authorization-server|openid-configuration)(\/|$)/.test(
      path,
    ) ||
    path.endsWith('/.well-known/openid-configuration') ||
    path === '/register' ||
    path === '/authorize' ||
    path === '/token'
  );
}

/** The settings' protected resource, its keys looked up when the first access token comes. */
export function mcpOAuth(settings: { resource: string; issuer: string }, rule: SignInRule): McpOAuth {
  let found: Promise<JWTVerifyGetKey> | undefined;
  const keys = () => {
    if (found) return found;
    const attempt = discoverKeys(settings.issuer);
    found = attempt;
    // A failure is the caller's to report (a 503); the next access token tries again.
    attempt.catch(() => {
      if (found === attempt) found = undefined;
    });
    return attempt;
  };
  return { resource: settings.resource, issuer: settings.issuer, rule, keys };
}

/** The URL of `resource`'s metadata: the well-known name inserted before the resource's path (RFC 9728 §3.1). */
function metadataUrl(resource: string): URL {
  const u = new URL(resource);
  return new URL(`/.well-known/oauth-protected-resource${u.pathname.replace(/\/$/, '')}`, u.origin);
}

/**
 * The protected-resource metadata when `path` asks for it (the bare well-known path, the form for /mcp, and the
 * form for the resource's own path when a proxy puts it elsewhere); undefined for every other path.
 */
export function resourceMetadata(oauth: McpOAuth, path: string): Record<string, unknown> | undefined {
  const paths = ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp'];
  if (!paths.includes(path) && path !== metadataUrl(oauth.resource).pathname) return undefined;
  return {
    resource: oauth.resource,
    authorization_servers: [oauth.issuer],
    bearer_methods_supported: ['header'],
    resource_name: 'toolshift MCP gateway',
  };
}

/** The challenge of a 401 on the MCP face: where the client finds the authorization server to sign in with. */
function challengeOf(oauth: McpOAuth, presented: boolean): string {
  const metadata = `resource_metadata="${metadataUrl(oauth.resource).href}"`;
  return `Bearer realm="toolshift", ${metadata}${presented ? ', error="invalid_token"' : ''}`;
}

/**
 * The 401 of a request without a credential the service takes (`variable` names the one to send). On the MCP face
 * of a protected resource its challenge names the resource's metadata, so an MCP client signs in; elsewhere it is
 * RFC 6750's plain challenge, from which a client reads that there is no OAuth.
 */
export function unauthorized(r: {
  oauth: McpOAuth | undefined;
  onFace: boolean;
  variable: string;
  presented: string | undefined;
}): never {
  const oauth = r.onFace ? r.oauth : undefined;
  let how = `send Authorization: Bearer <token> with the value of ${r.variable}`;
  if (oauth) how = `sign in with OAuth (the authorization server is ${oauth.issuer}) or ${how}`;
  else if (r.oauth && r.presented !== undefined && looksLikeJwt(r.presented)) {
    how = `an OAuth access token opens only the MCP endpoint (/mcp); here, ${how}`;
  }
  const challenge = oauth
    ? challengeOf(oauth, r.presented !== undefined)
    : `Bearer realm="toolshift"${r.presented === undefined ? '' : ', error="invalid_token"'}`;
  throw new HttpError(
    401,
    `${r.presented === undefined ? 'Missing' : 'Invalid'} credentials: ${how}`,
    {},
    { 'WWW-Authenticate': challenge },
  );
}

/** Whether a bearer is shaped as a signed JWT (three base64url parts, a JSON header): an access token, not a key. */
export const looksLikeJwt = (presented: string) => /^eyJ[\w-]*\.[\w-]+\.[\w-]+$/.test(presented);

/**
 * An access token on the MCP face: checked, its person made or found a user (403 when the rule refuses them), and
 * the request's principal set to them with the MCP role only. A token refused is a 401 saying why.
 */
export async function accessTokenEntry(
  c: Context,
  oauth: McpOAuth,
  store: IdentityStore,
  token: string,
): Promise<void> {
  const claims = await verified(oauth, token);
  const { user } = await store.signIn(oauth.issuer, claims, oauth.rule);
  const holder = await store.holderOf(user.id, 'runner', OAUTH_VIA);
  if (!holder) throw refused(oauth, `user ${user.name} was removed by the operator`);
  c.set('identity', store);
  c.set('principal', {
    role: 'mcp',
    roles: ['mcp'],
    variable: `an OAuth access token of user ${user.name}`,
    // The user, not the token: MCP handles outlive a refreshed token.
    credential: `oauth:${user.id}`,
    user: holder,
  });
}

const refused = (oauth: McpOAuth, why: string) =>
  new HttpError(
    401,
    `The access token was refused: ${why}`,
    {},
    { 'WWW-Authenticate': challengeOf(oauth, true) },
  );

/** The token's claims when the authorization server signed it for this resource and it is still valid. */
async function verified(oauth: McpOAuth, token: string): Promise<JWTPayload> {
  let keys: JWTVerifyGetKey;
  try {
    keys = await oauth.keys();
  } catch (err) {
    throw new HttpError(503, `Access tokens cannot be checked now: ${(err as Error).message}`);
  }
  try {
    const options = { issuer: oauth.issuer, audience: oauth.resource, algorithms: ASYMMETRIC };
    const { payload } = await jwtVerify(token, keys, { ...options, requiredClaims: ['exp', 'sub'] });
    return payload;
  } catch (err) {
    const why = refusalOf(err, oauth);
    if (why !== undefined) throw refused(oauth, why);
    // Not the token: its keys could not be had (unreachable, too slow, too big, not a key set).
    const message = `the keys of ${oauth.issuer}: ${(err as Error).message}`;
    throw new HttpError(503, `Access tokens cannot be checked now: ${message}`);
  }
}

/** Why jose refused a token, in words for its holder (never the token); undefined when the keys failed instead. */
function refusalOf(err: unknown, oauth: McpOAuth): string | undefined {
  if (err instanceof errors.JWTExpired) return 'it has expired; the client signs in again (or refreshes it)';
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') {
      return `its audience is not this endpoint; a client asks ${oauth.issuer} for a token for the resource ${oauth.resource}`;
    }
    if (err.claim === 'iss')
      return `it was not issued by ${oauth.issuer}, the authorization server of this endpoint`;
    return `its ${err.claim} claim is ${err.reason === 'missing' ? 'missing' : 'not valid'}`;
  }
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JWKSNoMatchingKey) {
    return `it is not signed by a key of ${oauth.issuer}`;
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return `its algorithm is not one of ${ASYMMETRIC.join(', ')}`;
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid)
    return 'it is not a well-formed signed JWT';
  return undefined;
}

/**
 * The authorization server's keys, from the jwks_uri of its metadata: RFC 8414's document, else OpenID Connect's.
 * The metadata must name the configured issuer, and an https issuer's keys are fetched over https.
 */
async function discoverKeys(issuer: string): Promise<JWTVerifyGetKey> {
  const at = new URL(issuer);
  const path = at.pathname.replace(/\/$/, '');
  const urls = [
    `${at.origin}/.well-known/oauth-authorization-server${path}`,
    `${at.origin}${path}/.well-known/openid-configuration`,
  ];
  const failures: string[] = [];
  for (const url of urls) {
    try {
      const metadata = JSON.parse(await boundedBody(url)) as Record<string, unknown>;
      if (metadata.issuer !== issuer) {
        throw new Error(`it names the issuer ${JSON.stringify(String(metadata.issuer).slice(0, 200))}`);
      }
      const jwks =
        typeof metadata.jwks_uri === 'string' && URL.canParse(metadata.jwks_uri)
          ? new URL(metadata.jwks_uri)
          : undefined;
      if (
        !jwks ||
        !/^https?:$/.test(jwks.protocol) ||
        (at.protocol === 'https:' && jwks.protocol !== 'https:')
      ) {
        throw new Error(`its jwks_uri is not an ${at.protocol.slice(0, -1)} URL`);
      }
      return createRemoteJWKSet(jwks, { timeoutDuration: FETCH_TIMEOUT_MS, [customFetch]: fetchBounded });
    } catch (err) {
      failures.push(`${url}: ${(err as Error).message}`);
    }
  }
  throw new Error(
    `the metadata of the authorization server ${issuer} could not be read (${failures.join('; ')})`,
  );
}

/** Every fetch of the authorization server's: within the time and size bounds, no redirect followed. */
const fetchBounded = boundedFetch({ timeoutMs: FETCH_TIMEOUT_MS, maxBytes: MAX_DOCUMENT_BYTES });

/** A metadata document's text: a 200. */
async function boundedBody(url: string): Promise<string> {
  const res = await fetchBounded(url, { headers: { accept: 'application/json' } });
  if (res.status !== 200) throw new Error(`answered ${res.status}`);
  return res.text();
}
