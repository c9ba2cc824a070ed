import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import {
  type AuthInfo,
  createMcpHandler,
  OAuthError,
  OAuthErrorCode,
  requireBearerAuth,
  Server,
} from '@modelcontextprotocol/server';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';

// An upstream MCP server that takes each person's OAuth access token (the MCP authorization specification), built
// with the SDK: its protected resource metadata (RFC 9728) names the authorization server, the SDK's bearer gate
// verifies the JWT against that server's keys (its audience this server), and each tool checks the scope it needs.
// It records who (the token's subject) called what, and every token it was given.

/** A tool and the scope it needs. */
const TOOLS = [
  { name: 'whoami', scope: 'notes:read', description: 'Who the server sees' },
  { name: 'write_note', scope: 'notes:write', description: 'Writes a note' },
] as const;

export async function startOAuthUpstream(opts: {
  issuer: string;
  /** What the metadata names as its authorization servers (default: `issuer`): a test's malicious one. */
  authorizationServers?: string[];
}) {
  const state = { calls: [] as { tool: string; sub: string }[], tokens: new Set<string>() };
  const handler = createMcpHandler(({ requestInfo }) => {
    const bearer = /^Bearer (.+)$/.exec(requestInfo?.headers.get('authorization') ?? '')?.[1] ?? '';
    const claims = decodeJwt(bearer);
    const scopes = String(claims.scope ?? '').split(' ');
    const server = new Server({ name: 'oauth-upstream', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler('tools/list', async () => ({
      tools: TOOLS.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: { type: 'object' },
      })),
    }));
    server.setRequestHandler('tools/call', async (request) => {
      const tool = TOOLS.find((t) => t.name === request.params.name);
      if (!tool) return { isError: true, content: [{ type: 'text', text: 'no such tool' }] };
      if (!scopes.includes(tool.scope)) {
        return {
          isError: true,
          content: [{ type: 'text', text: `insufficient scope: needs ${tool.scope}` }],
        };
      }
      state.calls.push({ tool: tool.name, sub: String(claims.sub) });
      return { content: [{ type: 'text', text: `${tool.name} as ${claims.sub}` }] };
    });
    return server;
  });
  const jwks = createRemoteJWKSet(new URL(`${opts.issuer}/jwks`));
  let url = '';
  const gate = () =>
    requireBearerAuth({
      expectedResource: new URL(url),
      resourceMetadataUrl: `${new URL(url).origin}/.well-known/oauth-protected-resource/mcp`,
      verifier: {
        async verifyAccessToken(token): Promise<AuthInfo> {
          // A token that does not verify (expired on its way here, on a busy machine) is invalid_token, a 401 its
          // client answers by refreshing, as a real resource server says it.
          const { payload } = await jwtVerify(token, jwks, { issuer: opts.issuer, audience: url }).catch(
            (err: Error) => {
              throw new OAuthError(
                OAuthErrorCode.InvalidToken,
                `the access token is refused: ${err.message}`,
              );
            },
          );
          return {
            token,
            clientId: String(payload.client_id ?? ''),
            scopes: String(payload.scope ?? '').split(' '),
            expiresAt: payload.exp,
            resource: new URL(url),
          };
        },
      },
    });
  const listening = await new Promise<{ close: () => Promise<void> }>((resolve) => {
    const server = serve(
      {
        hostname: '127.0.0.1',
        port: 0,
        fetch: async (request: Request) => {
          const path = new URL(request.url).pathname;
          if (path.startsWith('/.well-known/oauth-protected-resource')) {
            return Response.json({
              resource: url,
              authorization_servers: opts.authorizationServers ?? [opts.issuer],
            });
          }
          const token = /^Bearer (.+)$/.exec(request.headers.get('authorization') ?? '')?.[1];
          if (token) state.tokens.add(token);
          const auth = await gate()(request);
          if (auth instanceof Response) return auth;
          return handler.fetch(request, { authInfo: auth });
        },
      },
      (info: AddressInfo) => {
        url = `http://127.0.0.1:${info.port}/mcp`;
        resolve({
          close: () =>
            new Promise<void>((done) => {
              server.close(() => done());
              if ('closeAllConnections' in server) server.closeAllConnections();
            }),
        });
      },
    );
  });
  return {
    get url() {
      return url;
    },
    state,
    async close() {
      await handler.close();
      await listening.close();
    },
  };
}
