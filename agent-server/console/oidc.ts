import type { Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { html } from 'hono/html';
import * as oidc from 'openid-client';
import type { SignInRule, SignInSettings } from '../../lib/config/sign-in.ts';
import { boundedFetch } from '../../lib/http/bounded-fetch.ts';
import { HttpError } from '../../lib/http/http-error.ts';
import { isLoopbackHost } from '../../lib/http/security.ts';
import type { Claims } from '../../lib/identity/sign-in.ts';
import type { IdentityStore } from '../../lib/identity/store.ts';
import type { Logger } from '../../lib/telemetry/log.ts';
import { loginPage } from './pages.ts';
import { type Logins, SIGN_IN_LABEL } from './sessions.ts';
import { VERSION } from './static-files.ts';

// Signing in to the console with the identity provider people already have (OpenID Connect, authorization code
// with PKCE, by openid-client). /console/oidc/start puts the flow (its state, PKCE verifier and nonce) in an
// HttpOnly cookie of this browser only, so nothing is stored for a visitor who never comes back;
// /console/oidc/callback takes it (once: the cookie goes, and the provider's code works once), finds or makes
// the user (lib/identity/sign-in.ts, by the operator's rule), and logs them in with a key of their own made for
// the login (OIDC_ROLE; it expires with the login and is revoked at log out), so everything a login made with a
// user's key does holds for them. The token login stays beside it for the operator.

export const START_PATH = '/console/oidc/start';
export const CALLBACK_PATH = '/console/oidc/callback';
const FLOW_MS = 10 * 60_000;
/** What an identity provider may answer: metadata, keys, tokens, user info. */
const PROVIDER_BOUNDS = { timeoutMs: 10_000, maxBytes: 1024 * 1024 };

export interface OidcDeps {
  settings: NonNullable<SignInSettings['console']>;
  rule: SignInRule;
  identity: IdentityStore;
  logins: Logins;
  sessionMs: number;
  log: Logger;
}

/** The flow kept between the start and the callback, in the browser's cookie. */
interface Flow {
  state: string;
  verifier: string;
  nonce: string;
  redirect: string;
  /** When it started (ms): a flow lasts FLOW_MS, whatever the browser keeps. */
  at: number;
}

const flowCookie = (c: Context) =>
  `toolshift_oidc_${/:(\d+)$/.exec(c.req.header('host') ?? '')?.[1] ?? '80'}`;
const said = (v: string | undefined) => (v ?? '').replace(/[^\x20-\x7e]/g, '').slice(0, 300);

/** The flow this browser started, if it did, within FLOW_MS. */
function flowOf(c: Context): Flow | undefined {
  const raw = getCookie(c, flowCookie(c));
  if (raw === undefined || raw.length > 2000) return undefined;
  try {
    const f = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Flow;
    const strings = [f.state, f.verifier, f.nonce, f.redirect].every((v) => typeof v === 'string');
    return strings && typeof f.at === 'number' && Date.now() - f.at < FLOW_MS ? f : undefined;
  } catch {
    return undefined;
  }
}

/** Where the provider sends the browser back: OIDC_REDIRECT_URL, else this request's own address. */
function redirectOf(c: Context, deps: OidcDeps): string {
  if (deps.settings.redirectUrl) return deps.settings.redirectUrl;
  return `${new URL(c.req.url).protocol}//${c.req.header('host')}${CALLBACK_PATH}`;
}

/** The console's sign-in with the identity provider: what the login page names it by, and its routes. */
export function oidcSignIn(deps: OidcDeps) {
  const provider = discoverer(deps.settings);
  return {
    /** What the login page's button names. */
    label: labelOf(deps),
    install(app: Hono): void {
      app.get(START_PATH, (c) => start(c, deps, provider));
      app.get(CALLBACK_PATH, (c) => callback(c, deps, provider));
    },
  };
}

type Provider = () => Promise<oidc.Configuration>;

/** The provider's configuration, discovered once (a failed discovery is asked again next time). */
function discoverer({ issuer, clientId, clientSecret }: OidcDeps['settings']): Provider {
  let found: Promise<oidc.Configuration> | undefined;
  return () => {
    found ??= oidc
      .discovery(new URL(issuer), clientId, clientSecret, clientSecret ? undefined : oidc.None(), {
        // Plain http only for a provider on this machine (a test's, a developer's).
        execute: isLoopbackHost(new URL(issuer).hostname) ? [oidc.allowInsecureRequests] : [],
        [oidc.customFetch]: boundedFetch(PROVIDER_BOUNDS),
      })
      .catch((err: unknown) => {
        found = undefined;
        throw new HttpError(
          502,
          `The identity provider ${issuer} could not be reached: ${(err as Error).message}`,
        );
      });
    return found;
  };
}

async function start(c: Context, deps: OidcDeps, provider: Provider): Promise<Response> {
  c.header('cache-control', 'no-store');
  let config: oidc.Configuration;
  try {
    config = await provider();
  } catch (err) {
    return c.html(loginPage(VERSION, (err as Error).message, { signIn: labelOf(deps) }), 502);
  }
  const redirect = redirectOf(c, deps);
  const flow: Flow = {
    state: oidc.randomState(),
    verifier: oidc.randomPKCECodeVerifier(),
    nonce: oidc.randomNonce(),
    redirect,
    at: Date.now(),
  };
  // Lax: the provider sends the browser back from its own site, a navigation a Strict cookie would not come with.
  setCookie(c, flowCookie(c), Buffer.from(JSON.stringify(flow)).toString('base64url'), {
    httpOnly: true,
    sameSite: 'Lax',
    path: '/console/oidc',
    secure: redirect.startsWith('https:'),
    maxAge: FLOW_MS / 1000,
  });
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: redirect,
    scope: 'openid email profile',
    code_challenge: await oidc.calculatePKCECodeChallenge(flow.verifier),
    code_challenge_method: 'S256',
    state: flow.state,
    nonce: flow.nonce,
  });
  return c.redirect(url.href, 302);
}

/**
 * The person the provider vouches for: the ID token's claims, with what user info adds (email, groups). An email
 * and whether it is verified come together, from one source: the ID token's, else user info's.
 */
async function claimsOf(c: Context, deps: OidcDeps, provider: Provider, flow: Flow): Promise<Claims> {
  const config = await provider();
  let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
  try {
    tokens = await oidc.authorizationCodeGrant(
      config,
      new URL(c.req.url),
      {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      },
      { redirect_uri: flow.redirect },
    );
  } catch (err) {
    throw new HttpError(401, `The identity provider's answer was refused: ${said((err as Error).message)}`);
  }
  const claims = (tokens.claims() ?? {}) as Claims;
  const wanted = claims.email === undefined || claims[deps.rule.groupsClaim] === undefined;
  if (!wanted || !config.serverMetadata().userinfo_endpoint || typeof claims.sub !== 'string') return claims;
  const info = (await oidc
    .fetchUserInfo(config, tokens.access_token, claims.sub)
    .catch(() => ({}))) as Claims;
  const email = claims.email === undefined ? info : claims;
  return { ...info, ...claims, email: email.email, email_verified: email.email_verified };
}

/** The most live console sign-in keys one user has: past it, their oldest is revoked. */
const LIVE_SIGN_INS = 20;

/** A key of the user's for a new login; their sign-in keys that ended are deleted, the oldest live ones past 20 revoked. */
async function signInKey(deps: OidcDeps, user: string) {
  await deps.identity.pruneKeys(user, SIGN_IN_LABEL, LIVE_SIGN_INS - 1);
  return deps.identity.createKey({
    user,
    role: deps.rule.role,
    expiresInMs: deps.sessionMs,
    label: SIGN_IN_LABEL,
  });
}

async function callback(c: Context, deps: OidcDeps, provider: Provider): Promise<Response> {
  c.header('cache-control', 'no-store');
  const refused = (status: 400 | 401 | 403 | 502, message: string) =>
    c.html(loginPage(VERSION, message, { signIn: labelOf(deps) }), status);
  const flow = flowOf(c);
  deleteCookie(c, flowCookie(c), { path: '/console/oidc' });
  // Only the flow this browser started is answered: another page's link (a forged code or error) finds none.
  if (!flow || c.req.query('state') !== flow.state) {
    return refused(
      400,
      'This sign-in was not started in this browser, or took over 10 minutes: sign in again.',
    );
  }
  const error = c.req.query('error');
  if (error !== undefined) {
    return refused(
      401,
      `The identity provider did not sign you in: ${said(c.req.query('error_description') ?? error)}`,
    );
  }
  try {
    const claims = await claimsOf(c, deps, provider, flow);
    const { user, made } = await deps.identity.signIn(deps.settings.issuer, claims, deps.rule);
    const key = await signInKey(deps, user.name);
    await deps.logins.logIn(c, key.key);
    deps.log.info(
      { user: user.name, made, key: key.id },
      'signed in to the console with the identity provider',
    );
    return c.html(continuePage());
  } catch (err) {
    if (err instanceof HttpError && (err.status === 401 || err.status === 403 || err.status === 502)) {
      return refused(err.status, err.message);
    }
    throw err;
  }
}

const labelOf = (deps: OidcDeps) => new URL(deps.settings.issuer).host;

export type OidcSignIn = ReturnType<typeof oidcSignIn>;

/**
 * Signed in: on to the console. A page, not a redirect: a redirect would carry on the provider's cross-site
 * navigation, which the login's SameSite=Strict cookie does not come with; this page's own navigation does.
 */
function continuePage() {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta http-equiv="refresh" content="0;url=/console/" />
        <title>Signed in · toolshift</title>
      </head>
      <body>
        <p>Signed in. <a href="/console/">Open the console</a>.</p>
      </body>
    </html>`;
}
