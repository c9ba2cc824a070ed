import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Listening, listen } from '../../lib/http/serve.ts';
import { makeStack } from '../helpers/stack.ts';

// Three small holes from the adversarial review, shown by what a client on a real socket gets: /health told
// anyone an upstream's stderr (a database URL with its password was readable), pids and commands; a POST
// without a body (curl -X POST …/reload) and an MCP client's DELETE /mcp (how a 2025-era client ends its
// session) were refused with 415, so sessions were never ended by their clients.

const TOKENS = {
  admin: 'admin-token-0123456789',
  agent: 'agent-token-0123456789',
  mcp: 'mcp-token-0123456789',
};
const SECRET = 'hunter2-db-password';
const LEAKY = `id: leaky
description: A server that prints its connection string and dies.
backend:
  mcp:
    command: ${process.execPath}
    args: ["-e", "console.error('connecting to postgres://app:${SECRET}@db:5432/prod'); process.exit(3)"]
`;

let stack: Awaited<ReturnType<typeof makeStack>> | undefined;
let server: Listening | undefined;
afterEach(async () => {
  await server?.close();
  await stack?.close();
  server = undefined;
  stack = undefined;
});

/** Sends raw HTTP/1.1 bytes, as curl does, and returns the status line's code and the body. */
function raw(url: string, request: string): Promise<{ status: number; text: string }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.end(request));
    let text = '';
    socket.on('data', (c) => {
      text += c;
    });
    socket.on('end', () => resolve({ status: Number(text.slice(9, 12)), text }));
    socket.on('error', reject);
  });
}

describe('GET /health', () => {
  it('says only that the gateway is up without a token; the operator sees the upstreams', async () => {
    stack = await makeStack({ toolsets: { 'leaky.yaml': LEAKY }, tokens: TOKENS });
    // Make the upstream fail, so its reason (with the stderr line) is recorded.
    const on = await stack.post(
      stack.gatewayApp,
      '/mcp/tools/anything/call',
      { session_id: 's', arguments: {} },
      { authorization: `Bearer ${TOKENS.admin}` },
    );
    expect(on.status).toBeGreaterThanOrEqual(400);
    await stack.post(
      stack.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'ACTIVATE', toolset_ids: ['leaky'], session_id: 's' },
      { authorization: `Bearer ${TOKENS.admin}` },
    );
    expect(JSON.stringify(stack.gateway.upstreams())).toContain(SECRET);
    server = await listen(stack.gatewayApp, 0, '127.0.0.1');
    const anonymous = await fetch(`${server.url}/health`);
    expect(anonymous.status).toBe(200);
    const text = await anonymous.text();
    expect(JSON.parse(text)).toEqual({ status: 'ok' });
    expect(text).not.toContain(SECRET);
    const wrong = await (
      await fetch(`${server.url}/health`, { headers: { authorization: 'Bearer nope' } })
    ).text();
    expect(wrong).not.toContain(SECRET);
    const operator = await fetch(`${server.url}/health`, {
      headers: { authorization: `Bearer ${TOKENS.admin}` },
    });
    expect(JSON.stringify(await operator.json())).toContain('upstreams');
  }, 30_000);
});

describe('GET /health of the agent-server and the tool-server', () => {
  it('says only {status} without a valid token of that service; its callers see the rest', async () => {
    const tokens = { ...TOKENS, gateway: 'tools-token-0123456789', user: 'user-token-0123456789' };
    stack = await makeStack({ tokens });
    const s = stack;
    for (const [app, token, detail] of [
      [s.agentApp, tokens.user, 'model_configured'],
      [s.toolApp, tokens.gateway, 'tools'],
    ] as const) {
      server = await listen(app, 0, '127.0.0.1');
      for (const headers of [
        {} as Record<string, string>,
        { authorization: 'Bearer nope' },
        { authorization: `Bearer ${TOKENS.admin}` },
      ]) {
        const res = await fetch(`${server.url}/health`, { headers });
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ status: 'ok' });
      }
      const caller = await fetch(`${server.url}/health`, { headers: { authorization: `Bearer ${token}` } });
      expect(Object.keys(await caller.json())).toEqual(['status', detail]);
      await server.close();
      server = undefined;
    }
  });
});

describe('requests without a body', () => {
  it('a POST with neither body nor Content-Type is taken as empty, as curl -X POST sends it', async () => {
    stack = await makeStack({ tokens: TOKENS, toolsets: { 'leaky.yaml': LEAKY } });
    server = await listen(stack.gatewayApp, 0, '127.0.0.1');
    const host = new URL(server.url).host;
    const res = await raw(
      server.url,
      `POST /mcp/admin/reload HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${TOKENS.admin}\r\nAccept: */*\r\nConnection: close\r\n\r\n`,
    );
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('"unchanged"');
    // A body that is not JSON is still refused: the browser door stays shut.
    const form = await raw(
      server.url,
      `POST /mcp/admin/reload HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${TOKENS.admin}\r\nContent-Length: 3\r\nConnection: close\r\n\r\na=b`,
    );
    expect(form.status).toBe(415);
  });

  it('DELETE /mcp with its Mcp-Session-Id ends a 2025-era session', async () => {
    stack = await makeStack({ tokens: TOKENS, toolsets: { 'leaky.yaml': LEAKY } });
    server = await listen(stack.gatewayApp, 0, '127.0.0.1');
    const headers = {
      authorization: `Bearer ${TOKENS.mcp}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    const init = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    expect(init.status).toBe(200);
    await init.text();
    const session = init.headers.get('mcp-session-id') as string;
    expect(session).toBeTruthy();
    const ended = await fetch(`${server.url}/mcp`, {
      method: 'DELETE',
      headers: {
        authorization: `Bearer ${TOKENS.mcp}`,
        'mcp-session-id': session,
        'mcp-protocol-version': '2025-06-18',
      },
    });
    expect(ended.status).toBe(200);
    const after = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: { ...headers, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
  });
});
