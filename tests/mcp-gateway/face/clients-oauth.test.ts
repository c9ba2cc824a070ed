import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { type Listening, listen } from '../../../lib/http/serve.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Issue 16: with GATEWAY_MCP_TOKEN set, OAuth-capable clients (mcp-remote, the Inspector) started an OAuth
// dance and failed with a confusing registration error: the well-known OAuth paths answered 401 (so "there
// may be OAuth behind a token"), the 401 on /mcp had no WWW-Authenticate, and its text listed four tokens of
// which /mcp takes two. The gateway now answers as a server without OAuth does.

const TOKENS = {
  admin: 'admin-token-oauth-1',
  agent: 'agent-token-oauth-2',
  mcp: 'mcp-token-oauth-3',
  user: 'user-token-oauth-4',
};
const run = promisify(execFile);
const CLIENT = path.resolve('tests/fixtures/mcp/oauth-client.mjs');
const OTHER_VARIABLES = /GATEWAY_ADMIN_TOKEN|GATEWAY_AGENT_TOKEN|AGENT_API_TOKEN/;

let stack: Stack | undefined;
let server: Listening | undefined;
afterEach(async () => {
  await server?.close();
  await stack?.close();
  server = undefined;
  stack = undefined;
});

async function start(): Promise<string> {
  stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
  server = await listen(stack.gatewayApp, 0, '127.0.0.1');
  return server.url;
}

const WELL_KNOWN = [
  '/.well-known/oauth-protected-resource',
  '/.well-known/oauth-protected-resource/mcp',
  '/.well-known/oauth-authorization-server',
  '/.well-known/oauth-authorization-server/mcp',
  '/.well-known/openid-configuration',
  '/mcp/.well-known/openid-configuration',
];

describe('a gateway without OAuth, as OAuth-capable clients see it', () => {
  it('answers the well-known OAuth paths 404, with a token or without', async () => {
    const base = await start();
    for (const p of WELL_KNOWN) {
      for (const authorization of [undefined, 'Bearer wrong-token', `Bearer ${TOKENS.mcp}`]) {
        const res = await fetch(`${base}${p}`, {
          headers: { accept: 'application/json', ...(authorization ? { authorization } : {}) },
        });
        expect(res.status, `${p} (${authorization ?? 'no token'})`).toBe(404);
        expect(res.headers.get('www-authenticate')).toBeNull();
        const body = (await res.json()) as { error: string };
        expect(body.error).toMatch(/does not use OAuth.*GATEWAY_MCP_TOKEN/);
      }
    }
  });

  it('challenges /mcp with a plain Bearer (no resource_metadata), naming the one variable /mcp takes', async () => {
    const base = await start();
    const initialize = (authorization?: string) =>
      fetch(`${base}/mcp`, {
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
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 'x', version: '1' },
          },
        }),
      });
    const missing = await initialize();
    expect(missing.status).toBe(401);
    const challenge = missing.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer( |$)/);
    expect(challenge).not.toMatch(/resource_metadata/);
    const text = ((await missing.json()) as { error: string }).error;
    expect(text).toBe(
      'Missing credentials: send Authorization: Bearer <token> with the value of GATEWAY_MCP_TOKEN',
    );
    expect(text).not.toMatch(OTHER_VARIABLES);

    const wrong = await initialize('Bearer not-the-token');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/);
    expect(((await wrong.json()) as { error: string }).error).toMatch(
      /^Invalid credentials: .*GATEWAY_MCP_TOKEN$/,
    );

    // A fixed view is the MCP face too; the REST routes keep naming their own tokens.
    const view = await fetch(`${base}/mcp/toolsets/fs_read`, { method: 'POST' });
    expect(((await view.json()) as { error: string }).error).toMatch(/GATEWAY_MCP_TOKEN$/);
    const rest = await fetch(`${base}/mcp/tools`);
    expect(rest.status).toBe(401);
    expect(rest.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(((await rest.json()) as { error: string }).error).toMatch(
      /GATEWAY_ADMIN_TOKEN or GATEWAY_AGENT_TOKEN/,
    );

    // With the token, the same request is served.
    expect((await initialize(`Bearer ${TOKENS.mcp}`)).status).toBe(200);
  });

  it('v1 SDK client with an OAuth provider: discovery finds no OAuth, and the error names the token', async () => {
    const base = await start();
    // In a process of its own, as mcp-remote and the Inspector run it (and with Node's own fetch and
    // Response: this process's HTTP server swaps the global Response for its own).
    const { stdout } = await run(process.execPath, [CLIENT, `${base}/mcp`], { timeout: 30_000 });
    const outcome = JSON.parse(stdout) as {
      error: { name: string; message: string } | null;
      requests: string[];
      redirected: string[];
      saved: unknown[];
    };
    expect(outcome.error, 'connected without a token').not.toBeNull();
    const message = outcome.error?.message ?? '';
    expect(message).toMatch(
      /does not use OAuth.*send Authorization: Bearer <token> with the value of GATEWAY_MCP_TOKEN/,
    );
    expect(message).not.toMatch(OTHER_VARIABLES);
    // Not the registration error users saw: an empty OAuth error, or a raw body it could not read.
    expect(message).not.toMatch(/Invalid OAuth error response|registration|HTTP 401/i);
    expect(outcome.redirected).toEqual([]);
    expect(outcome.saved).toEqual([]);
    expect(outcome.requests[0]).toBe('POST /mcp 401');
    // Every metadata probe was a 404, as from a server without OAuth.
    const probes = outcome.requests.filter((r) => r.includes('/.well-known/'));
    expect(probes).toContain('GET /.well-known/oauth-protected-resource/mcp 404');
    expect(probes).toContain('GET /.well-known/oauth-authorization-server 404');
    for (const p of probes) expect(p).toMatch(/ 404$/);
  });
});
