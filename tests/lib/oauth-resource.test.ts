import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { parseRule } from '../../lib/config/sign-in.ts';
import type { HttpError } from '../../lib/http/http-error.ts';
import { mcpOAuth, resourceMetadata, unauthorized } from '../../lib/http/oauth-resource.ts';
import { securityFor } from '../../lib/http/security.ts';

// The protected resource's parts that need no authorization server running: where its metadata is, and how the
// authorization server's keys are found (fetch answered here): bounded, checked, kept once found, and looked up
// again after a failure rather than the failure kept.

const rule = parseRule('@example.com', 'groups', 'runner');
const ISSUER = 'https://id.example.com/realms/main';
const RFC8414 = 'https://id.example.com/.well-known/oauth-authorization-server/realms/main';
const OPENID = 'https://id.example.com/realms/main/.well-known/openid-configuration';

/** Answers fetch from `answers` (a URL's answer, or 404), recording every URL asked. */
function answering(answers: Record<string, () => Response>): string[] {
  const asked: string[] = [];
  vi.stubGlobal('fetch', async (url: string) => {
    asked.push(String(url));
    return answers[String(url)]?.() ?? new Response('not here', { status: 404 });
  });
  return asked;
}
const json = (body: unknown) => () => Response.json(body);

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('the protected resource', () => {
  it("is the gateway's when MCP_OAUTH_RESOURCE is set, with the issuer and the sign-in rule; no other service's", () => {
    const env = { MCP_OAUTH_RESOURCE: 'https://gw.example.com/mcp', OIDC_ALLOW: '@example.com' };
    const oauth = securityFor(loadConfig({ ...env, MCP_OAUTH_ISSUER: ISSUER }), 'mcp-gateway').oauth;
    expect(oauth).toMatchObject({ resource: 'https://gw.example.com/mcp', issuer: ISSUER });
    expect(oauth?.rule.domains).toEqual(['example.com']);
    expect(
      securityFor(loadConfig({ ...env, MCP_OAUTH_ISSUER: ISSUER }), 'agent-server').oauth,
    ).toBeUndefined();
    expect(securityFor(loadConfig({}), 'mcp-gateway').oauth).toBeUndefined();
  });

  it('names its metadata after the resource path (RFC 9728), also behind a proxy that moves it', () => {
    const oauth = mcpOAuth({ resource: 'https://gw.example.com/team/mcp', issuer: ISSUER }, rule);
    for (const p of [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-protected-resource/team/mcp',
    ]) {
      expect(resourceMetadata(oauth, p)?.resource, p).toBe('https://gw.example.com/team/mcp');
    }
    expect(resourceMetadata(oauth, '/.well-known/oauth-authorization-server')).toBeUndefined();
    let challenge = '';
    try {
      unauthorized({ oauth, onFace: true, variable: 'GATEWAY_MCP_TOKEN', presented: undefined });
    } catch (err) {
      challenge = (err as HttpError).headers['WWW-Authenticate'];
    }
    expect(challenge).toBe(
      'Bearer realm="toolshift", resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/team/mcp"',
    );
  });

  it("finds the keys through RFC 8414's metadata, else OpenID's; a failed look-up is tried again, a found one kept", async () => {
    const asked = answering({});
    const oauth = mcpOAuth({ resource: 'https://gw.example.com/mcp', issuer: ISSUER }, rule);
    await expect(oauth.keys()).rejects.toThrow(
      `the metadata of the authorization server ${ISSUER} could not be read (${RFC8414}: answered 404; ${OPENID}: answered 404)`,
    );
    expect(asked).toEqual([RFC8414, OPENID]);
    answering({ [OPENID]: json({ issuer: ISSUER, jwks_uri: `${ISSUER}/certs` }) });
    const keys = await oauth.keys();
    expect(typeof keys).toBe('function');
    expect(await oauth.keys()).toBe(keys);
  });

  it('refuses metadata naming another issuer, an http jwks_uri for an https issuer, a document past 256 KiB', async () => {
    const cases: [Record<string, () => Response>, string][] = [
      [
        { [RFC8414]: json({ issuer: 'https://evil.example.com', jwks_uri: `${ISSUER}/certs` }) },
        'it names the issuer "https://evil.example.com"',
      ],
      [
        { [RFC8414]: json({ issuer: ISSUER, jwks_uri: 'http://id.example.com/certs' }) },
        'its jwks_uri is not an https URL',
      ],
      [
        { [RFC8414]: () => new Response(`{"issuer":"${'x'.repeat(300 * 1024)}"}`) },
        'https://id.example.com answered more than 262144 bytes',
      ],
    ];
    for (const [answers, why] of cases) {
      answering(answers);
      const oauth = mcpOAuth({ resource: 'https://gw.example.com/mcp', issuer: ISSUER }, rule);
      const err = await oauth.keys().catch((e: Error) => e);
      expect(String(err)).toContain(`${RFC8414}: ${why}`);
    }
  });
});
