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
// with PKCE, by openid-client). /console/oidc/start keeps the flow's verifier and nonce under its state (one use, 10
// minutes, any process) and binds the state to this browser with a cookie; /console/oidc/callback redeems the code,
// finds or makes the user (lib/identity/sign-in.ts, by the operator's rule), and logs them in with a key of their
// own made for the login (OIDC_ROLE; it expires with the login and is revoked at log out), so everything a login
// made with a user's key does holds for them. The token login stays beside it for the operator.

export const START_PATH = '/console/oidc/start';
const CALLBACK_PATH = '/console/oidc/callback';
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

/** The flow kept between the start and the callback. */
interface Flow {
  verifier: string;
  nonce: string;
  redirect: string;
}

const flowCookie = (c: Context) =>
  `toolshift_oidc_${/:(\d+)$/.exec(c.req.header('host') ?? '')?.[1] ?? '80'}`;
const originOf = (c: Context) => `${new URL(c.req.url).protocol}//${c.req.header('host')}`;
const said = (v: string | undefined) => (v ?? '').replace(/[^\x20-\x7e]/g, '').slice(0, 300);

/** The console's sign-in with the identity provider: what the login page names it by, and its routes. */
export function oidcSignIn(deps: OidcDeps) {
  const provider = discoverer(deps.settings);
  const label = new URL(deps.settings.issuer).host;
  return {
    /** What the login page's button names. */
    label,
    install(app: Hono): void {
      app.get(START_PATH, (c) => start(c, deps, provider));
      app.get(CALLBACK_PATH, (c) => callback(c, deps, provider, label));
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
  const config = await provider();
  const flow: Flow = {
    verifier: oidc.randomPKCECodeVerifier(),
    nonce: oidc.randomNonce(),
    redirect: `${originOf(c)}${CALLBACK_PATH}`,
  };
  const state = oidc.randomState();
  await deps.logins.keep(state, JSON.stringify(flow), FLOW_MS);
  // Lax: the provider sends the browser back from its own site, a navigation a Strict cookie would not come with.
  setCookie(c, flowCookie(c), state, {
    httpOnly: true,
    sameSite: 'Lax',
    path: '/console/oidc',
    secure: new URL(c.req.url).protocol === 'https:',
    maxAge: FLOW_MS / 1000,
  });
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: flow.redirect,
    scope: 'openid email profile',
    code_challenge: await oidc.calculatePKCECodeChallenge(flow.verifier),
    code_challenge_method: 'S256',
    state,
    nonce: flow.nonce,
  });
  c.header('cache-control', 'no-store');
  return c.redirect(url.href, 302);
}

/** The person the provider vouches for: the ID token's claims, with what user info adds (email, groups). */
async function claimsOf(c: Context, deps: OidcDeps, provider: Provider, state: string, flow: Flow) {
  const config = await provider();
  let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
  try {
    tokens = await oidc.authorizationCodeGrant(
      config,
      new URL(c.req.url),
      {
        pkceCodeVerifier: flow.verifier,
        expectedState: state,
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
  const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub).catch(() => ({}));
  return { ...info, ...claims } as Claims;
}

async function callback(c: Context, deps: OidcDeps, provider: Provider, label: string): Promise<Response> {
  c.header('cache-control', 'no-store');
  const refused = (status: 400 | 401 | 403 | 502, message: string) =>
    c.html(loginPage(VERSION, message, { signIn: label }), status);
  const state = getCookie(c, flowCookie(c));
  deleteCookie(c, flowCookie(c), { path: '/console/oidc' });
  const error = c.req.query('error');
  if (error !== undefined) {
    return refused(
      401,
      `The identity provider did not sign you in: ${said(c.req.query('error_description') ?? error)}`,
    );
  }
  const kept = state === undefined ? undefined : await deps.logins.take(state);
  if (state === undefined || kept === undefined) {
    return refused(
      400,
      'This sign-in was not started in this browser, or took over 10 minutes: sign in again.',
    );
  }
  try {
    const claims = await claimsOf(c, deps, provider, state, JSON.parse(kept) as Flow);
    const { user, made } = await deps.identity.signIn(deps.settings.issuer, claims, deps.rule);
    const key = await deps.identity.createKey({
      user: user.name,
      role: deps.rule.role,
      expiresInMs: deps.sessionMs,
      label: SIGN_IN_LABEL,
    });
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
