import { createHash, randomBytes } from 'node:crypto';
import type { AuthProvider } from '@modelcontextprotocol/client';
import type { Sealer } from '../../lib/identity/sealed.ts';
import type { IdentityStore } from '../../lib/identity/store.ts';
import type { Logger } from '../../lib/telemetry/log.ts';
import {
  authorizationUrl,
  discover,
  type OAuthClient,
  OAuthError,
  register,
  revokeToken,
  type ServerMetadata,
  type Tokens,
  tokenRequest,
} from './oauth-protocol.ts';
import { ConsentNeeded } from './upstream-types.ts';

// Each person's OAuth grant at an OAuth toolset's server (the toolset file's `oauth:`): connecting (a flow: its
// state and PKCE verifier kept sealed, used once, for ten minutes), the grant kept sealed per person and toolset,
// its access token refreshed before it expires (and on a 401), and dropped on request (revoked at the server when
// it has a revocation endpoint). The transport of a person's connection gets `auth()` as its authProvider. No
// token leaves this file but in the Authorization header: not in a log, an audit row, an error or an answer.

/** An OAuth toolset's settings (mcp-backend-spec.ts OAuthSpec), as far as connecting needs them. */
export interface OAuthSettings {
  resource: string;
  client?: OAuthClient;
}

/** What the grant keeps sealed: the tokens, and where to refresh and revoke them. */
interface Kept {
  access_token: string;
  refresh_token?: string;
  token_endpoint: string;
  revocation_endpoint?: string;
  client: OAuthClient;
}

/** What a flow keeps sealed until its callback. */
interface FlowKept {
  verifier: string;
  redirect_uri: string;
  scopes: string[];
  token_endpoint: string;
  revocation_endpoint?: string;
  client: OAuthClient;
  resource: string;
}

/** A grant given or dropped, for the audit (the toolset and scopes; never a token). */
export interface GrantEvent {
  kind: 'grant' | 'drop';
  user: string;
  toolset: string;
  scopes: string[];
  ok: boolean;
  detail?: string;
}

const FLOW_MS = 10 * 60_000;
/** An access token this close to its expiry is refreshed before it is used. */
const EARLY_MS = 60_000;

const hash = (state: string) => createHash('sha256').update(state).digest('base64url');

export class OAuthAccounts {
  readonly #grants: ReturnType<IdentityStore['oauth']>;
  readonly #log: Logger;
  readonly #onEvent: (e: GrantEvent) => void;
  /** Refreshes under way, one per person and toolset (a rotated refresh token is good once). */
  readonly #refreshing = new Map<string, Promise<string>>();

  constructor(deps: {
    identity: IdentityStore;
    sealer: Sealer;
    log: Logger;
    onEvent?: (e: GrantEvent) => void;
  }) {
    this.#grants = deps.identity.oauth(deps.sealer);
    this.#log = deps.log;
    this.#onEvent = deps.onEvent ?? (() => {});
  }

  /** Starts user `user`'s connection of `toolset` for `scopes`: the URL of the server's consent page. */
  async start(
    user: string,
    toolset: string,
    settings: OAuthSettings,
    p: { redirectUri: string; scopes: string[] },
  ): Promise<string> {
    const meta = await discover(settings.resource);
    const client = settings.client ?? (await this.#registered(meta, p.redirectUri));
    const state = randomBytes(32).toString('base64url');
    const verifier = randomBytes(32).toString('base64url');
    const kept: FlowKept = {
      verifier,
      redirect_uri: p.redirectUri,
      scopes: p.scopes,
      token_endpoint: meta.token_endpoint,
      ...(meta.revocation_endpoint ? { revocation_endpoint: meta.revocation_endpoint } : {}),
      client,
      resource: settings.resource,
    };
    await this.#grants.startFlow({
      stateHash: hash(state),
      user,
      toolset,
      kept,
      expiresAt: Date.now() + FLOW_MS,
    });
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    return authorizationUrl(meta, client, {
      redirectUri: p.redirectUri,
      scopes: p.scopes,
      state,
      challenge,
      resource: settings.resource,
    });
  }

  /**
   * Completes a flow with the server's code: the grant saved for `user`, iff the state is theirs, unused and not
   * expired (else `refused` says why).
   */
  async complete(
    user: string,
    toolset: string,
    p: { code: string; state: string },
  ): Promise<{ toolset: string; scopes: string[] } | { refused: 'unknown' | 'another_user' | 'expired' }> {
    const flow = await this.#grants.takeFlow<FlowKept>(hash(p.state), user, toolset);
    if (!flow.ok) return { refused: flow.why };
    const f = flow.kept;
    let tokens: Tokens;
    try {
      tokens = await tokenRequest(f.token_endpoint, f.client, {
        grant_type: 'authorization_code',
        code: p.code,
        redirect_uri: f.redirect_uri,
        code_verifier: f.verifier,
        resource: f.resource,
      });
    } catch (err) {
      this.#onEvent({
        kind: 'grant',
        user,
        toolset: flow.toolset,
        scopes: f.scopes,
        ok: false,
        detail: (err as Error).message,
      });
      throw err;
    }
    const scopes = tokens.scope ? tokens.scope.split(' ').filter(Boolean) : f.scopes;
    await this.#save(user, flow.toolset, tokens, scopes, f);
    this.#onEvent({ kind: 'grant', user, toolset: flow.toolset, scopes, ok: true });
    return { toolset: flow.toolset, scopes };
  }

  /** The scopes of user `user`'s grant for `toolset`; undefined when they have none. */
  async scopesOf(user: string, toolset: string): Promise<string[] | undefined> {
    return (await this.#grants.grantOf<Kept>(user, toolset))?.scopes;
  }

  /** Drops user `user`'s grant for `toolset`, revoking it at the server when it can; false when there was none. */
  async drop(user: string, toolset: string, why: string): Promise<boolean> {
    const grant = await this.#grants.grantOf<Kept>(user, toolset);
    const dropped = await this.#grants.dropGrant(user, toolset);
    if (!dropped) return false;
    const k = grant?.tokens;
    let detail = why;
    if (k?.revocation_endpoint) {
      const [token, hint] = k.refresh_token
        ? [k.refresh_token, 'refresh_token' as const]
        : [k.access_token, 'access_token' as const];
      await revokeToken(k.revocation_endpoint, k.client, token, hint).catch((err: Error) => {
        detail = `${why}; the server's revocation failed: ${err.message}`;
        this.#log.warn(
          { toolset, reason: err.message },
          'revoking an upstream grant failed (the grant is dropped)',
        );
      });
    }
    this.#onEvent({ kind: 'drop', user, toolset, scopes: grant?.scopes ?? [], ok: true, detail });
    return true;
  }

  /** The authProvider of user `user`'s connection to `toolset`'s server (their token, refreshed as it needs). */
  auth(user: string, toolset: string, connectUrl?: string): AuthProvider {
    return {
      token: () => this.#token(user, toolset, false, connectUrl),
      onUnauthorized: async () => {
        await this.#token(user, toolset, true, connectUrl);
      },
    };
  }

  /** A live access token: refreshed when it is about to expire (or `force`); ConsentNeeded when there is none. */
  async #token(user: string, toolset: string, force: boolean, connectUrl?: string): Promise<string> {
    const grant = await this.#grants.grantOf<Kept>(user, toolset);
    const ask = (why: string) =>
      new ConsentNeeded(`Toolset ${toolset} needs your own account connected: ${why}`, toolset, connectUrl);
    if (!grant) throw ask('you have not connected it');
    const fresh = grant.expires_at === null || grant.expires_at - Date.now() > EARLY_MS;
    if (fresh && !force) return grant.tokens.access_token;
    const k = grant.tokens;
    if (!k.refresh_token) {
      if (!force && grant.expires_at !== null && grant.expires_at > Date.now()) return k.access_token;
      await this.drop(user, toolset, 'expired, with no refresh token');
      throw ask('your grant expired (the server gave no refresh token)');
    }
    const key = `${user}\u0000${toolset}`;
    let run = this.#refreshing.get(key);
    if (!run) {
      run = this.#refresh(user, toolset, k, grant.scopes).finally(() => this.#refreshing.delete(key));
      this.#refreshing.set(key, run);
    }
    try {
      return await run;
    } catch (err) {
      if (!(err instanceof OAuthError && err.lost)) throw err;
      await this.drop(user, toolset, `the server refused its refresh: ${err.message}`);
      throw ask('the server no longer takes your grant (revoked or expired)');
    }
  }

  async #refresh(user: string, toolset: string, k: Kept, scopes: string[]): Promise<string> {
    const tokens = await tokenRequest(k.token_endpoint, k.client, {
      grant_type: 'refresh_token',
      refresh_token: k.refresh_token as string,
    });
    // A server that does not rotate refresh tokens keeps the one it gave.
    const kept = { ...tokens, refresh_token: tokens.refresh_token ?? k.refresh_token };
    await this.#save(user, toolset, kept, tokens.scope ? tokens.scope.split(' ').filter(Boolean) : scopes, k);
    this.#log.info({ toolset, user }, 'upstream access token refreshed');
    return tokens.access_token;
  }

  async #save(
    user: string,
    toolset: string,
    t: Tokens,
    scopes: string[],
    where: { token_endpoint: string; revocation_endpoint?: string; client: OAuthClient },
  ) {
    const tokens: Kept = {
      access_token: t.access_token,
      ...(t.refresh_token ? { refresh_token: t.refresh_token } : {}),
      token_endpoint: where.token_endpoint,
      ...(where.revocation_endpoint ? { revocation_endpoint: where.revocation_endpoint } : {}),
      client: where.client,
    };
    await this.#grants.saveGrant({ user, toolset, tokens, scopes, expires_at: t.expires_at });
  }

  /** The gateway's client at the server for `redirectUri`: registered once (RFC 7591), kept sealed. */
  async #registered(meta: ServerMetadata, redirectUri: string): Promise<OAuthClient> {
    const server = `${meta.issuer} ${redirectUri}`;
    const known = await this.#grants.clientOf<OAuthClient>(server);
    if (known) return known;
    const client = await register(meta, redirectUri);
    await this.#grants.saveClient(server, client);
    return client;
  }
}
