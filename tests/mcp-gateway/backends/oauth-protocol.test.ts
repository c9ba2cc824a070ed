import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { discover, register, tokenRequest } from '../../../mcp-gateway/backends/oauth-protocol.ts';

// The gateway as an OAuth client of an upstream (backends/oauth-protocol.ts) facing a malicious or broken
// authorization server: each way it lies or misbehaves is refused with the reason, and nothing it says is
// followed elsewhere.

type Handler = (req: IncomingMessage, res: ServerResponse, origin: string) => void;

const servers: { close(): void }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A loopback server answering with `handler`; its origin. */
async function serve(handler: Handler): Promise<string> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  server.on('request', (req, res) => handler(req, res, origin));
  servers.push({ close: () => server.close() });
  return origin;
}

const json = (res: ServerResponse, body: unknown, status = 200) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** An MCP server (the protected resource) whose metadata names `issuer`, and that issuer's metadata document. */
async function upstreamWith(metadata: (issuer: string) => Record<string, unknown> | Handler) {
  const as = await serve((req, res, origin) => {
    const m = metadata(origin);
    if (typeof m === 'function') return m(req, res, origin);
    if (req.url?.startsWith('/.well-known/')) return json(res, m);
    json(res, { error: 'not_found' }, 404);
  });
  const mcp = await serve((req, res, origin) => {
    if (req.url?.startsWith('/.well-known/oauth-protected-resource'))
      return json(res, { resource: `${origin}/mcp`, authorization_servers: [as] });
    json(res, {}, 401);
  });
  return { resource: `${mcp}/mcp`, issuer: as };
}

const good = (issuer: string) => ({
  issuer,
  authorization_endpoint: `${issuer}/auth`,
  token_endpoint: `${issuer}/token`,
  registration_endpoint: `${issuer}/reg`,
  code_challenge_methods_supported: ['S256'],
});

describe('discovering the authorization server of an upstream', () => {
  it('takes metadata that names the advertised issuer, with its endpoints on its host', async () => {
    const { resource, issuer } = await upstreamWith(good);
    await expect(discover(resource)).resolves.toMatchObject({ issuer, token_endpoint: `${issuer}/token` });
  });

  it('refuses metadata that names another issuer', async () => {
    const { resource } = await upstreamWith((issuer) => ({
      ...good(issuer),
      issuer: 'https://evil.example',
    }));
    await expect(discover(resource)).rejects.toThrow(
      /names issuer https:\/\/evil\.example, not http:\/\/127\.0\.0\.1/,
    );
  });

  it('refuses a token endpoint on another host than the issuer', async () => {
    const { resource } = await upstreamWith((issuer) => ({
      ...good(issuer),
      token_endpoint: `${issuer.replace('127.0.0.1', 'localhost')}/token`,
    }));
    await expect(discover(resource)).rejects.toThrow(
      /token_endpoint is on localhost:\d+, not on the issuer's host 127\.0\.0\.1/,
    );
  });

  it('refuses a huge answer, a redirect, and a server without PKCE', async () => {
    const huge = await upstreamWith(() => (_req, res) => json(res, { pad: 'x'.repeat(200_000) }));
    await expect(discover(huge.resource)).rejects.toThrow(/answered more than 65536 bytes/);
    const moved = await upstreamWith(() => (_req, res) => {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data' });
      res.end();
    });
    await expect(discover(moved.resource)).rejects.toThrow(/redirected \(302\); redirects are not followed/);
    const plain = await upstreamWith((issuer) => ({
      ...good(issuer),
      code_challenge_methods_supported: ['plain'],
    }));
    await expect(discover(plain.resource)).rejects.toThrow('does not take PKCE with S256');
  });

  it('refuses an upstream that names no authorization server', async () => {
    const mcp = await serve((_req, res) => json(res, { resource: 'x' }));
    await expect(discover(`${mcp}/mcp`)).rejects.toThrow(/names no authorization server/);
  });
});

describe("the token endpoint's answers", () => {
  it('says what the server refused, and marks a lost grant, never echoing what was sent', async () => {
    const as = await serve((_req, res) =>
      json(res, { error: 'invalid_grant', error_description: 'revoked' }, 400),
    );
    const err = await tokenRequest(`${as}/token`, { client_id: 'c' }, { refresh_token: 'rt-secret-1' }).catch(
      (e: Error & { lost: boolean }) => e,
    );
    expect(err).toMatchObject({
      message: 'the token request was refused (invalid_grant: revoked)',
      lost: true,
    });
    expect(String(err)).not.toContain('rt-secret-1');
  });

  it('refuses an answer without an access token, and a registration without a client_id', async () => {
    const as = await serve((_req, res) => json(res, { token_type: 'Bearer' }));
    await expect(tokenRequest(`${as}/token`, { client_id: 'c' }, {})).rejects.toThrow(
      'without an access_token',
    );
    const meta = { ...good(as), registration_endpoint: `${as}/reg` };
    await expect(register(meta, 'http://127.0.0.1/console/connect/callback')).rejects.toThrow(
      'gave no client_id',
    );
  });
});
