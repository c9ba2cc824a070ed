import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentServer } from '../../agent-server/server.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { installBase } from '../../lib/http/http.ts';
import { securityFor } from '../../lib/http/security.ts';
import { createLogger } from '../../lib/telemetry/log.ts';
import { gatewayRoutes } from '../../mcp-gateway/contract.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { answer, call, calls, ScriptedModel } from '../helpers/scripted-model.ts';
import { log, makeStack, openSecurity, retain, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const TOKENS = {
  admin: 'admin-token-0123456789abcdef',
  agent: 'agent-token-0123456789abcdef',
  gateway: 'tools-token-0123456789abcdef',
  user: 'user-token-0123456789abcdef',
};

/** The attacks a web page can make with the default setup: a simple request, a foreign page, a rebound name. */
const CROSS_SITE: [string, Record<string, string>, number][] = [
  ['a text/plain simple request', { 'content-type': 'text/plain' }, 415],
  ['a form post', { 'content-type': 'application/x-www-form-urlencoded' }, 415],
  ['a foreign Origin', { 'content-type': 'application/json', origin: 'https://evil.example' }, 403],
  ['an opaque Origin', { 'content-type': 'application/json', origin: 'null' }, 403],
  ['a DNS-rebinding Host', { 'content-type': 'application/json', host: 'evil.example:8080' }, 403],
  [
    'a cross-site fetch without Origin',
    { 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' },
    403,
  ],
];

async function send(app: Hono, url: string, headers: Record<string, string>, body: unknown) {
  const res = await app.request(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { error: string } };
}

describe('the browser door, on every service', () => {
  it.each(CROSS_SITE)('refuses %s with nothing executed', async (_what, headers, status) => {
    const model = new ScriptedModel([calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] }))]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, model });
    const s = stack;
    const toTools = await send(s.toolApp, '/tools/write_file', headers, { path: 'pwned.txt', content: 'x' });
    const toGatewayCall = await send(s.gatewayApp, '/mcp/tools/write_file/call', headers, {
      session_id: 'victim',
      arguments: { path: 'pwned2.txt', content: 'x' },
    });
    const toAdmin = await send(s.gatewayApp, '/mcp/admin/toolsets', headers, {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      session_id: 'victim',
    });
    const toDisable = await send(s.gatewayApp, '/mcp/admin/toolsets', headers, {
      action: 'DISABLE',
      toolset_ids: ['fs_read'],
    });
    const toAgent = await send(s.agentApp, '/agent/execute_task', headers, {
      goal: 'do the attacker’s bidding',
    });
    for (const res of [toTools, toGatewayCall, toAdmin, toDisable, toAgent]) {
      expect(res.status).toBe(status);
      expect(res.body.error).toMatch(/Content-Type: application\/json|not allowed/);
    }
    // By effect: no file, no session change, no ceiling change, no task, no model call.
    expect(existsSync(path.join(s.root, 'pwned.txt'))).toBe(false);
    expect(existsSync(path.join(s.root, 'pwned2.txt'))).toBe(false);
    const victim = await s.get(s.gatewayApp, '/mcp/admin/toolsets?session_id=victim');
    expect(
      victim.body.toolsets.map((t: { active: boolean; enabled: boolean }) => [t.active, t.enabled]),
    ).toEqual([
      [false, true],
      [false, true],
    ]);
    expect((await s.get(s.agentApp, '/agent/tasks')).body.tasks).toEqual([]);
    expect(model.requests).toHaveLength(0);
  });

  it('answers loopback requests, loopback origins (with CORS headers) and allowed names as before', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    for (const host of ['127.0.0.1:8080', 'localhost:8080', '[::1]:8080', '127.0.0.2']) {
      const res = await s.gatewayApp.request('/mcp/admin/toolsets', { headers: { host } });
      expect(res.status).toBe(200);
    }
    const fromLocalPage = await s.gatewayApp.request('/mcp/admin/toolsets', {
      headers: { origin: 'http://localhost:5173' },
    });
    expect(fromLocalPage.status).toBe(200);
    expect(fromLocalPage.headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
    const write = await send(
      s.toolApp,
      '/tools/write_file',
      { 'content-type': 'application/json; charset=utf-8' },
      {
        path: 'ok.txt',
        content: 'fine',
      },
    );
    expect(write.status).toBe(200);
    expect(await readFile(path.join(s.root, 'ok.txt'), 'utf8')).toBe('fine');

    const app = new Hono();
    installBase(app, log, {
      ...openSecurity,
      allowedHosts: ['toolshift.internal'],
      allowedOrigins: ['https://console.example.org'],
    });
    app.get('/probe', (c) => c.json({ ok: true }));
    const named = await app.request('/probe', {
      headers: { host: 'toolshift.internal:8080', origin: 'https://console.example.org' },
    });
    expect(named.status).toBe(200);
    expect(named.headers.get('access-control-allow-origin')).toBe('https://console.example.org');
    const foreign = await app.request('/probe', { headers: { origin: 'https://evil.example' } });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('refuses to listen on a public address without the service’s tokens, saying why', async () => {
    const base = { HOST: '0.0.0.0', TOOL_SERVER_PORT: '0', AGENT_PORT: '0', FS_ROOTS: '/tmp' };
    await expect(startToolServer(loadConfig(base))).rejects.toThrow(
      /tool-server refuses to listen on 0\.0\.0\.0, which is not a loopback address, without TOOL_SERVER_TOKEN/,
    );
    await expect(
      startAgentServer(loadConfig({ ...base, TOOLSHIFT_DATA_DIR: '/tmp/ts-none' })),
    ).rejects.toThrow(/agent-server refuses to listen on 0\.0\.0\.0,.* without AGENT_API_TOKEN/);
    expect(() => securityFor(loadConfig({ HOST: '10.0.0.5' }), 'mcp-gateway')).toThrow(
      /without GATEWAY_ADMIN_TOKEN and GATEWAY_AGENT_TOKEN/,
    );
    // With the tokens, or with TOOLSHIFT_INSECURE=1, it may.
    const withTokens = loadConfig({ HOST: '0.0.0.0', GATEWAY_ADMIN_TOKEN: 'x1', GATEWAY_AGENT_TOKEN: 'x2' });
    expect(securityFor(withTokens, 'mcp-gateway').tokens).toHaveLength(2);
    expect(() =>
      securityFor(loadConfig({ HOST: '0.0.0.0', TOOLSHIFT_INSECURE: '1' }), 'tool-server'),
    ).not.toThrow();
    expect(() =>
      securityFor(loadConfig({ GATEWAY_ADMIN_TOKEN: 'same', GATEWAY_AGENT_TOKEN: 'same' }), 'mcp-gateway'),
    ).toThrow(/must differ/);
  });
});

/** Every route a Hono app registered, with path parameters filled in. */
function inventory(app: Hono): { method: string; path: string }[] {
  const seen = new Set<string>();
  return app.routes
    .filter((r) => r.method !== 'ALL')
    .map((r) => ({ method: r.method, path: r.path.replace(/:(\w+)/g, 'x') }))
    .filter((r) => !seen.has(`${r.method} ${r.path}`) && seen.add(`${r.method} ${r.path}`));
}

describe('tokens on every route', () => {
  it('needs the service’s token on every route but /health, found from the routers themselves', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS, model: new ScriptedModel([]) });
    const s = stack;
    const services: [string, Hono, string, RegExp][] = [
      ['tool-server', s.toolApp, TOKENS.gateway, /TOOL_SERVER_TOKEN/],
      ['mcp-gateway', s.gatewayApp, TOKENS.admin, /GATEWAY_ADMIN_TOKEN or GATEWAY_AGENT_TOKEN/],
      ['agent-server', s.agentApp, TOKENS.user, /AGENT_API_TOKEN/],
    ];
    let checked = 0;
    for (const [name, app, token, variable] of services) {
      const routes = inventory(app);
      expect(routes.length, name).toBeGreaterThan(2);
      for (const r of routes) {
        const init = (headers: Record<string, string>) => ({
          method: r.method,
          headers: { 'content-type': 'application/json', ...headers },
          body: r.method === 'GET' ? undefined : '{}',
        });
        const anonymous = await app.request(r.path, init({}));
        const wrong = await app.request(r.path, init({ authorization: 'Bearer not-the-token' }));
        const right = await app.request(r.path, init({ authorization: `Bearer ${token}` }));
        if (r.method === 'GET' && r.path === '/health') {
          expect(anonymous.status, `${name} ${r.method} ${r.path}`).not.toBe(401);
          continue;
        }
        expect(anonymous.status, `${name} ${r.method} ${r.path}`).toBe(401);
        expect(((await anonymous.json()) as { error: string }).error).toMatch(variable);
        expect(wrong.status, `${name} ${r.method} ${r.path}`).toBe(401);
        expect(right.status, `${name} ${r.method} ${r.path}`).not.toBe(401);
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(9);
  });

  it('refuses the agent’s credential on the operator’s routes and actions', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: TOKENS });
    const s = stack;
    const asAgent = { authorization: `Bearer ${TOKENS.agent}` };
    for (const action of ['DISABLE', 'ENABLE']) {
      const res = await s.post(
        s.gatewayApp,
        '/mcp/admin/toolsets',
        { action, toolset_ids: ['fs_read'] },
        asAgent,
      );
      expect(res.status).toBe(403);
      expect(res.body.error).toMatch(/not allowed with GATEWAY_AGENT_TOKEN/);
    }
    // Every route the contract reserves for the operator refuses the agent too.
    for (const spec of Object.values(gatewayRoutes) as { method: string; path: string; roles?: string[] }[]) {
      if (!spec.roles || spec.roles.includes('agent')) continue;
      const res = await s.gatewayApp.request(spec.path.replace(/\{\w+\}/g, 'x'), {
        method: spec.method.toUpperCase(),
        headers: { 'content-type': 'application/json', ...asAgent },
        body: spec.method === 'get' ? undefined : '{}',
      });
      expect(res.status, spec.path).toBe(403);
    }
    const listing = await s.get(s.gatewayApp, '/mcp/admin/toolsets', asAgent);
    expect(listing.body.toolsets.every((t: { enabled: boolean }) => t.enabled)).toBe(true);
    const asAdmin = { authorization: `Bearer ${TOKENS.admin}` };
    const disabled = await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'DISABLE', toolset_ids: ['fs_read'] },
      asAdmin,
    );
    expect(disabled.status).toBe(200);
    // The agent may still work a session's toolsets and call tools.
    const activated = await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'ACTIVATE', toolset_ids: ['fs_write'], session_id: 's1' },
      asAgent,
    );
    expect(activated.status).toBe(200);
  });

  it('never lets a token reach a prompt, a tool schema, a result, an error, an event or a log line', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write', 'nope'] })),
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
      calls(
        call('write_file', { path: 'a.txt', content: 'hello' }),
        call('read_text_file', { path: 'a.txt' }),
      ),
      calls(call('write_file', { path: '../outside.txt', content: 'x' })),
      answer('done'),
    ]);
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      tokens: TOKENS,
      model,
      log: createLogger('t', 'debug', sink),
    });
    const s = stack;
    const user = { authorization: `Bearer ${TOKENS.user}` };
    const result = await s.post(s.agentApp, '/agent/execute_task', { goal: 'write a.txt' }, user);
    expect(result.body.status).toBe('completed');
    const task = await s.get(s.agentApp, `/agent/tasks/${result.body.task_id}`, user);
    const refusals = await Promise.all([
      s.post(s.agentApp, '/agent/execute_task', { goal: 'x' }, { authorization: `Bearer ${TOKENS.admin}` }),
      s.post(
        s.gatewayApp,
        '/mcp/admin/toolsets',
        { action: 'DISABLE', toolset_ids: ['fs_read'] },
        {
          authorization: `Bearer ${TOKENS.agent}`,
        },
      ),
      s.post(
        s.toolApp,
        '/tools/write_file',
        { path: 'b', content: 'x' },
        { authorization: `Bearer ${TOKENS.user}` },
      ),
    ]);
    expect(refusals.map((r) => r.status)).toEqual([401, 403, 401]);
    const seen =
      JSON.stringify([model.requests, result.body, task.body, refusals.map((r) => r.body)]) + lines.join('');
    expect(lines.length).toBeGreaterThan(0);
    for (const token of Object.values(TOKENS)) expect(seen).not.toContain(token);
  });
});

describe('smaller holes', () => {
  it('refuses deeply nested JSON with a clear 400 on every service, and the model gets an error, not "cannot reach"', async () => {
    const deep = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
      calls(call('write_file', `{"path":"d.txt","content":"x","extra":${deep}}`)),
      answer('done'),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, model });
    const s = stack;
    const raw = (app: Hono, url: string, body: string) =>
      app.request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const answers = await Promise.all([
      raw(s.toolApp, '/tools/write_file', `{"path":"d.txt","content":"x","extra":${deep}}`),
      raw(
        s.gatewayApp,
        '/mcp/tools/write_file/call',
        `{"session_id":"a","arguments":{"path":"d.txt","extra":${deep}}}`,
      ),
      raw(s.agentApp, '/agent/execute_task', `{"goal":"x","extra":${deep}}`),
    ]);
    for (const res of answers) {
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe(
        'Request body nests deeper than 64 levels of arrays/objects',
      );
    }
    const result = await s.post(s.agentApp, '/agent/execute_task', { goal: 'write' });
    expect(result.body.status).toBe('completed');
    const toolMessage = Object.values(model.toolMessages(2)).at(-1);
    expect(toolMessage).toMatch(/^Error: the arguments of write_file nest too deeply/);
    expect(toolMessage).not.toMatch(/reach/i);
    expect(existsSync(path.join(s.root, 'd.txt'))).toBe(false);
  });

  it('does not run the tool calls of a reply cut off at the output limit, and fails clearly on the second', async () => {
    const cut = (args: unknown) => ({ ...calls(call('write_file', args)), finish_reason: 'length' });
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
      cut({ path: 'half.txt', content: 'the first half of a long' }),
      calls(call('write_file', { path: 'whole.txt', content: 'short' })),
      answer('done'),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, model });
    const s = stack;
    const ok = await s.post(s.agentApp, '/agent/execute_task', { goal: 'write' });
    expect(ok.body.status).toBe('completed');
    expect(existsSync(path.join(s.root, 'half.txt'))).toBe(false);
    expect(await readFile(path.join(s.root, 'whole.txt'), 'utf8')).toBe('short');
    const told = model.requests[2].messages.at(-1);
    expect(told).toMatchObject({ role: 'user' });
    expect(String(told?.content)).toMatch(
      /cut off at the output token limit .* none of its tool calls were run/,
    );

    const twice = new ScriptedModel([
      cut({ path: 'x.txt', content: 'a' }),
      cut({ path: 'y.txt', content: 'b' }),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, model: twice });
    const failed = await stack.post(stack.agentApp, '/agent/execute_task', { goal: 'write' });
    expect(failed.body).toMatchObject({ status: 'failed', steps: 2 });
    expect(failed.body.error).toMatch(/cut off at its output token limit twice/);
  });

  it('refuses unknown manage_toolsets fields and audits every refused activation', async () => {
    const model = new ScriptedModel([
      calls(
        call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'], command: 'rm -rf /' }),
        call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['nope'] }),
        call('manage_toolsets', { action: 'EXPLODE', toolset_ids: ['fs_write'] }),
      ),
      answer('done'),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, model });
    const s = stack;
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', { action: 'DISABLE', toolset_ids: ['fs_read'] });
    const disabledTry = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'z',
    });
    expect(disabledTry.status).toBe(403);
    const result = await s.post(s.agentApp, '/agent/execute_task', { goal: 'x' });
    const messages = Object.values(model.toolMessages(1));
    expect(messages[0]).toMatch(/^Error: Invalid arguments for manage_toolsets: Unrecognized key: "command"/);
    expect(messages[1]).toMatch(/^Error: Unknown toolset id\(s\): nope\. Valid ids: fs_read, fs_write/);
    expect(messages[2]).toMatch(/^Error: Invalid arguments for manage_toolsets: action: /);
    // Nothing was activated by the call that smuggled a field.
    const tools = await s.get(s.gatewayApp, `/mcp/tools?session_id=${result.body.session_id}`);
    expect(tools.body.tools).toEqual([]);
    await s.flushWrites();
    const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
    retain(db);
    const refused = db
      .prepare<[], { kind: string; subject: string; detail: string }>(
        'SELECT kind, subject, detail FROM audit WHERE ok = 0 ORDER BY id',
      )
      .all();
    db.close();
    expect(refused.map((r) => [r.kind, r.subject])).toEqual([
      ['activate', 'fs_read'],
      ['manage', 'ACTIVATE'],
      ['activate', 'nope'],
      ['manage', 'EXPLODE'],
    ]);
    expect(refused[0].detail).toBe('disabled');
    expect(refused[1].detail).toMatch(/command/);
  });

  it('keeps internal error messages out of 500 answers', async () => {
    const app = new Hono();
    installBase(app, log, openSecurity);
    app.get('/boom', () => {
      throw new Error('ENOENT /srv/secret/path/config.json');
    });
    const res = await app.request('/boom');
    expect(res.status).toBe(500);
    const body = (await res.json()) as { error: string };
    expect(body.error).toMatch(/^Internal error \(logged on the server as [0-9a-f-]{36}\)$/);
    expect(JSON.stringify(body)).not.toContain('secret');
  });
});
