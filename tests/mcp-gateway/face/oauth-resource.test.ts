import {
  Client,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRule } from '../../../lib/config/sign-in.ts';
import { mcpOAuth } from '../../../lib/http/oauth-resource.ts';
import { type Listening, listen } from '../../../lib/http/serve.ts';
import { type AuthorizationServer, startAuthorizationServer } from '../../helpers/authorization-server.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Issue 36, section 5: with MCP_OAUTH_RESOURCE set, /mcp is an OAuth 2.1 protected resource. Its metadata names
// the operator's authorization server, a 401 points there, and the MCP SDK client's own OAuth flow (dynamic
// registration, PKCE, a resource indicator) against oidc-provider gets a JWT access token that acts for the person
// it names, made a user by the sign-in rule. A forged, foreign, expired or other-audience token is a 401; a person
// the rule does not admit a 403, and no user is made; static tokens keep working.

const TOKENS = { admin: 'admin-token-oauth-rs', agent: 'agent-token-oauth-rs', mcp: 'mcp-token-oauth-rs' };
const PEOPLE = {
  ana: { email: 'ana@example.com', email_verified: true, preferred_username: 'ana' },
  ben: { email: 'ben@example.com', email_verified: true, preferred_username: 'ben' },
  eve: { email: 'eve@elsewhere.org', email_verified: true, preferred_username: 'eve' },
};
/** Where the client would be sent back to (never requested: the test takes the code from the redirect). */
const REDIRECT = 'http://127.0.0.1:9/oauth/callback';

let as: AuthorizationServer;
let stack: Stack;
let server: Listening;
let base = '';
let resource = '';
const clients: Client[] = [];

beforeAll(async () => {
  as = await startAuthorizationServer(PEOPLE);
  const oauth = mcpOAuth(
    { resource: 'http://127.0.0.1/mcp', issuer: as.issuer },
    parseRule('@example.com', 'groups', 'runner'),
  );
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS, oauth });
  server = await listen(stack.gatewayApp, 0, '127.0.0.1');
  base = server.url;
  // The resource is the endpoint as clients reach it, known once the gateway listens (MCP_OAUTH_RESOURCE).
  resource = `${base}/mcp`;
  oauth.resource = resource;
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await server?.close();
  await stack?.close();
  await as?.close();
});

/** The client side of the flow, in memory: its registration, tokens and PKCE verifier; it signs `login` in. */
class SigningInClient implements OAuthClientProvider {
  info?: StoredOAuthClientInformation;
  saved?: StoredOAuthTokens;
  verifier = '';
  discovery?: OAuthDiscoveryState;
  /** What the authorization server sent back to the redirect URL: the code, and its issuer (RFC 9207). */
  callback?: URLSearchParams;
  readonly login: string;
  constructor(login: string) {
    this.login = login;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'oauth test client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      // oidc-provider grants nothing without a scope; its resource server's is `mcp`.
      scope: 'mcp',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: StoredOAuthTokens) {
    this.saved = tokens;
  }
  async redirectToAuthorization(url: URL) {
    this.callback = await as.signIn(url, this.login, REDIRECT);
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

const modern = () =>
  new Client(
    { name: 'oauth-test', version: '1.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );

/** An SDK client of /mcp presenting `token` as it is. */
async function clientWith(token: string): Promise<Client> {
  const client = modern();
  await client.connect(
    new StreamableHTTPClientTransport(new URL(resource), { authProvider: { token: async () => token } }),
  );
  clients.push(client);
  return client;
}

type Result = { content?: unknown; isError?: boolean };
const text = (r: Result) => ((r.content as { text: string }[])[0] ?? { text: '' }).text;

/** A POST of an MCP initialize to `path` with `authorization`. */
const initialize = (path: string, authorization?: string) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(authorization ? { authorization } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    }),
  });

const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;

describe('/mcp as an OAuth protected resource', () => {
  it('serves its metadata without a token; the other OAuth paths stay 404 (the gateway is no authorization server)', async () => {
    for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const res = await fetch(`${base}${p}`);
      expect(res.status, p).toBe(200);
      expect(await res.json()).toEqual({
        resource,
        authorization_servers: [as.issuer],
        bearer_methods_supported: ['header'],
        resource_name: 'toolshift MCP gateway',
      });
    }
    for (const p of [
      '/.well-known/oauth-authorization-server',
      '/.well-known/openid-configuration',
      '/register',
    ]) {
      const res = await fetch(`${base}${p}`);
      expect(res.status, p).toBe(404);
      expect(((await res.json()) as { error: string }).error).toMatch(
        new RegExp(`not an authorization server: sign in with ${as.issuer}.*GATEWAY_MCP_TOKEN`),
      );
    }
  });

  it("challenges the MCP face with the metadata's URL; the REST routes keep the plain challenge", async () => {
    const metadata = `resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`;
    const missing = await initialize('/mcp');
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe(`Bearer realm="toolshift", ${metadata}`);
    expect(((await missing.json()) as { error: string }).error).toBe(
      `Missing credentials: sign in with OAuth (the authorization server is ${as.issuer}) or send Authorization: Bearer <token> with the value of GATEWAY_MCP_TOKEN`,
    );
    const wrong = await initialize('/mcp/toolsets/fs_read', 'Bearer not-a-token');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe(
      `Bearer realm="toolshift", ${metadata}, error="invalid_token"`,
    );
    const rest = await fetch(`${base}/mcp/tools`);
    expect(rest.status).toBe(401);
    expect(rest.headers.get('www-authenticate')).toBe('Bearer realm="toolshift"');
    // The static token keeps working on /mcp.
    expect((await initialize('/mcp', `Bearer ${TOKENS.mcp}`)).status).toBe(200);
  });

  it('lets the SDK client sign in (registration, PKCE), list and call tools as a user the rule made, named in the audit', async () => {
    const provider = new SigningInClient('ana');
    const client = modern();
    clients.push(client);
    const first = new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider });
    await expect(client.connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    // Registered dynamically, with a PKCE verifier, and sent to sign in: the code came back.
    expect(provider.info?.client_id).toBeTruthy();
    expect(provider.verifier.length).toBeGreaterThanOrEqual(43);
    expect(provider.callback?.get('code')).toBeTruthy();
    await first.finishAuth(provider.callback as URLSearchParams);
    const token = provider.saved?.access_token ?? '';
    expect(token.split('.')).toHaveLength(3);
    await client.close();

    await client.connect(new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['manage_toolsets', 'call_tool']);
    const activated = (await client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_read'] },
    })) as Result;
    expect(activated.isError, text(activated)).toBeFalsy();
    const handle = JSON.parse(text(activated)).session as string;
    const listed = (await client.callTool({
      name: 'call_tool',
      arguments: { session: handle, name: 'list_directory', arguments: { path: stack.root } },
    })) as Result;
    expect(listed.isError, text(listed)).toBeFalsy();

    const ana = (await stack.identity?.users())?.find((u) => u.name === 'ana');
    expect(ana?.email).toBe('ana@example.com');
    const { audit } = await stack.gateway.listAudit({ session_id: handle, limit: 100 });
    expect(audit.length).toBeGreaterThan(0);
    for (const row of audit) expect(row.actor).toBe('mcp client, user ana (OAuth access token)');

    // Another person's client, signed in too, does not reach Ana's session.
    const ben = await clientWith(
      await as.mint({ sub: 'ben', aud: resource, exp: inAnHour(), ...PEOPLE.ben }),
    );
    const theirs = (await ben.callTool({
      name: 'call_tool',
      arguments: { session: handle, name: 'list_directory', arguments: { path: stack.root } },
    })) as Result;
    expect(theirs.isError).toBe(true);
    expect(text(theirs)).toMatch(/Unknown session handle .* for this credential/);

    // The access token opens /mcp alone.
    const elsewhere = await fetch(`${base}/mcp/tools`, { headers: { authorization: `Bearer ${token}` } });
    expect(elsewhere.status).toBe(401);
    expect(((await elsewhere.json()) as { error: string }).error).toMatch(
      /an OAuth access token opens only the MCP endpoint/,
    );
  });

  it('refuses a forged, foreign, expired or other-audience token with a 401 saying which', async () => {
    const ana = { sub: 'ana', ...PEOPLE.ana };
    const cases: [string, string, RegExp][] = [
      [
        'forged',
        await as.mint({ ...ana, aud: resource, exp: inAnHour() }, { key: 'other' }),
        /not signed by a key of/,
      ],
      [
        'audience',
        await as.mint({ ...ana, aud: 'https://other.example.com/mcp', exp: inAnHour() }),
        /audience is not this endpoint/,
      ],
      [
        'expired',
        await as.mint({ ...ana, aud: resource, exp: Math.floor(Date.now() / 1000) - 60 }),
        /has expired/,
      ],
      [
        'issuer',
        await as.mint({ ...ana, iss: 'https://id.example.com', aud: resource, exp: inAnHour() }),
        /not issued by/,
      ],
      ['no expiry', await as.mint({ ...ana, aud: resource }), /exp claim is missing/],
    ];
    for (const [what, token, why] of cases) {
      const res = await initialize('/mcp', `Bearer ${token}`);
      expect(res.status, what).toBe(401);
      expect(res.headers.get('www-authenticate'), what).toMatch(/resource_metadata=.*error="invalid_token"/);
      const body = await res.text();
      expect(body, what).toMatch(why);
      expect(body, what).not.toContain(token.split('.')[1]);
    }
  });

  it('refuses a person the rule does not admit (403, saying why) and makes no user', async () => {
    const before = (await stack.identity?.users())?.length;
    const token = await as.mint({ sub: 'eve', aud: resource, exp: inAnHour(), ...PEOPLE.eve });
    const res = await initialize('/mcp', `Bearer ${token}`);
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toBe(
      'eve@elsewhere.org is not a user here, and is not let in on first sign-in: that needs a verified email at example.com',
    );
    expect((await stack.identity?.users())?.length).toBe(before);
  });
});
