import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockModel } from '../../bench/mock-model.ts';
import { type AuthorizationServer, startAuthorizationServer } from '../helpers/authorization-server.ts';
import { freePort } from '../helpers/chaos-stack.ts';
import { daemonCli, runnersOf } from '../helpers/cli.ts';
import { startDaemon } from '../helpers/daemon.ts';
import { startOAuthUpstream } from '../helpers/oauth-upstream.ts';

// Each person's own OAuth account at an upstream MCP server (issue 37), on a real daemon: the upstream is built
// with the SDK behind its bearer gate, oidc-provider its authorization server. Two people connect their own
// accounts (one through the console, one through the gateway's routes), each one's calls reach the upstream with
// their subject only, tokens are refreshed (they live one second), ACTIVATE asks only for the scopes of the tools
// it activates, a revoked grant asks again, and no token shows in an answer or the audit.

let tmp: string;
let data: string;
let daemon: ReturnType<typeof startDaemon>;
let model: Awaited<ReturnType<typeof startMockModel>>;
let as: AuthorizationServer;
let upstream: Awaited<ReturnType<typeof startOAuthUpstream>>;
let urls: Record<'agent-server' | 'mcp-gateway' | 'tool-server', string>;
const keys: Record<string, string> = {};
let cli: ReturnType<typeof daemonCli>;
/** Every answer the test was given, to look for tokens in. */
const answers: string[] = [];

const toolsetFile = (id: string, opts: { revoke: boolean; tools?: string[] }) =>
  writeFile(
    path.join(data, 'toolsets', `${id}.yaml`),
    [
      `id: ${id}`,
      'description: Notes at a service each person reaches with their own account',
      'backend:',
      '  mcp:',
      `    url: ${upstream.url}`,
      '    oauth:',
      `      revoke_on_deactivate: ${opts.revoke}`,
      ...(opts.tools ? [`tools: [${opts.tools.join(', ')}]`] : []),
      'tool_scopes:',
      '  whoami: [notes:read]',
      '  write_note: [notes:write]',
      `prefix: ${id}_`,
      'pin: false',
      '',
    ].join('\n'),
  );

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'oauth-accounts-'));
  data = path.join(tmp, 'data');
  cli = daemonCli({ data, home: tmp });
  await mkdir(path.join(data, 'toolsets'), { recursive: true });
  as = await startAuthorizationServer({ alice: {}, bob: {} }, [], {
    scopes: ['notes:read', 'notes:write'],
    accessTokenTTL: 1,
    refresh: true,
  });
  upstream = await startOAuthUpstream({ issuer: as.issuer });
  // `notes` offers whoami only: activating it asks for notes:read alone.
  await toolsetFile('notes', { revoke: false, tools: ['whoami'] });
  await toolsetFile('notes_rw', { revoke: true });
  model = await startMockModel({ script: (key) => ({ answer: `done ${key}` }) });
  daemon = startDaemon({
    AGENT_PORT: String(await freePort()),
    TOOLSHIFT_DATA_DIR: data,
    FS_ROOTS: tmp,
    HOME: tmp,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test',
  });
  urls = await daemon.listening;
  Object.assign(keys, await runnersOf(cli, ['alice', 'bob']));
}, 90_000);

afterAll(async () => {
  daemon?.child.kill('SIGTERM');
  await daemon?.exited;
  await upstream?.close();
  await as?.close();
  await model?.close();
  await rm(tmp, { recursive: true, force: true });
});

async function clientOf(key: string) {
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${urls['mcp-gateway']}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

/** A tool's text, kept to look for tokens in. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  const r = await client.callTool({ name, arguments: args });
  const text = (r.content as { text?: string }[]).map((c) => c.text ?? '').join('');
  answers.push(text);
  return text;
}
const activate = (client: Client, id: string, action = 'ACTIVATE') =>
  call(client, 'manage_toolsets', { action, toolset_ids: [id] });

/** The gateway's routes with `who`'s key. */
async function asUser(who: string, method: string, route: string, body?: unknown) {
  const res = await fetch(`${urls['mcp-gateway']}${route}`, {
    method,
    headers: { authorization: `Bearer ${keys[who]}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  answers.push(text);
  return { status: res.status, body: JSON.parse(text) };
}

const callback = () => `${urls['agent-server']}/console/connect/callback`;

/** `who` consents at the authorization server to a flow started through the gateway's routes: its code and state. */
async function consent(who: string, toolset: string, scopes?: string[]) {
  const started = await asUser(who, 'POST', `/mcp/me/connections/${toolset}`, {
    redirect_uri: callback(),
    ...(scopes ? { scopes } : {}),
  });
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  const back = await as.signIn(new URL(started.body.authorization_url), who, callback());
  return { code: back.get('code') as string, state: back.get('state') as string };
}

describe("each person's own OAuth account", () => {
  it('asks a person who has not connected, for the scopes of the tools activated only', async () => {
    const alice = await clientOf(keys.alice);
    const refused = await activate(alice, 'notes');
    expect(refused).toContain('Toolset notes: connect your own account');
    expect(refused).toContain(`${urls['agent-server']}/console/connect/notes?scope=notes%3Aread`);
    expect(refused).not.toContain('notes%3Awrite');
    await alice.close();
  });

  it('connects through the console, and her calls reach the upstream as her', async () => {
    const login = await fetch(`${urls['agent-server']}/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: keys.alice }),
    });
    expect(login.status).toBe(200);
    const jar = new Map(
      login.headers.getSetCookie().map((c) => c.split(';')[0].split('=') as [string, string]),
    );
    const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const listed = await (
      await fetch(`${urls['agent-server']}/console/toolsets`, { headers: { cookie: cookie() } })
    ).text();
    expect(listed).toContain('href="/console/connect/notes"');
    expect(listed).toContain('Connect your account');
    const start = await fetch(`${urls['agent-server']}/console/connect/notes?scope=notes:read`, {
      headers: { cookie: cookie() },
      redirect: 'manual',
    });
    expect(start.status, await start.clone().text()).toBe(302);
    for (const c of start.headers.getSetCookie())
      jar.set(...(c.split(';')[0].split('=') as [string, string]));
    const back = await as.signIn(new URL(start.headers.get('location') as string), 'alice', callback());
    const done = await fetch(`${callback()}?${back}`, { headers: { cookie: cookie() } });
    const page = await done.text();
    expect(done.status, page).toBe(200);
    expect(page).toContain('Your account is connected for <strong>notes</strong> (notes:read)');
    const alice = await clientOf(keys.alice);
    expect(await activate(alice, 'notes')).not.toContain('connect');
    expect(await call(alice, 'notes_whoami')).toBe('whoami as alice');
    await alice.close();
  });

  it("keeps each person's subject to their own calls, refreshing tokens as they expire", async () => {
    const { code, state } = await consent('bob', 'notes');
    // Another user's state is refused (and left for its own user); then it works once.
    const stolen = await asUser('alice', 'POST', '/mcp/me/connections/notes/complete', { code, state });
    expect(stolen.status).toBe(403);
    const done = await asUser('bob', 'POST', '/mcp/me/connections/notes/complete', { code, state });
    expect(done).toEqual({ status: 200, body: { toolset: 'notes', scopes: ['notes:read'] } });
    const again = await asUser('bob', 'POST', '/mcp/me/connections/notes/complete', { code, state });
    expect(again.status).toBe(400);
    expect(again.body.error).toContain('used already');
    upstream.state.calls.length = 0;
    const [alice, bob] = [await clientOf(keys.alice), await clientOf(keys.bob)];
    await activate(alice, 'notes');
    await activate(bob, 'notes');
    const before = upstream.state.tokens.size;
    for (let i = 0; i < 2; i++) {
      expect(await call(alice, 'notes_whoami')).toBe('whoami as alice');
      expect(await call(bob, 'notes_whoami')).toBe('whoami as bob');
    }
    expect(upstream.state.calls.map((c) => c.sub)).toEqual(['alice', 'bob', 'alice', 'bob']);
    // One-second tokens: each call went with a new one, and a token past its expiry is never sent again.
    expect(upstream.state.tokens.size).toBeGreaterThanOrEqual(before + 4);
    const firstExp = Math.max(...[...upstream.state.tokens].map((t) => Number(decodeJwt(t).exp)));
    await expect.poll(() => Date.now(), { timeout: 5000 }).toBeGreaterThan(firstExp * 1000);
    expect(await call(alice, 'notes_whoami')).toBe('whoami as alice');
    await alice.close();
    await bob.close();
  });

  it('asks again for a scope the grant lacks, and drops the grant on DEACTIVATE when the toolset says so', async () => {
    const { code, state } = await consent('bob', 'notes_rw', ['notes:read']);
    await asUser('bob', 'POST', '/mcp/me/connections/notes_rw/complete', { code, state });
    const bob = await clientOf(keys.bob);
    const lacking = await activate(bob, 'notes_rw');
    expect(lacking).toContain('your grant lacks notes:write');
    expect(lacking).toContain('scope=notes%3Aread%20notes%3Awrite');
    const more = await consent('bob', 'notes_rw', ['notes:read', 'notes:write']);
    await asUser('bob', 'POST', '/mcp/me/connections/notes_rw/complete', more);
    expect(await activate(bob, 'notes_rw')).not.toContain('connect');
    expect(await call(bob, 'notes_rw_write_note')).toBe('write_note as bob');
    await activate(bob, 'notes_rw', 'DEACTIVATE');
    const mine = await asUser('bob', 'GET', '/mcp/me/connections');
    expect(mine.body.connections).toContainEqual(
      expect.objectContaining({ toolset: 'notes_rw', connected: false }),
    );
    await bob.close();
  });

  it('asks again once the person revokes, and keeps every token out of answers and the audit', async () => {
    const bob = await clientOf(keys.bob);
    await activate(bob, 'notes');
    expect(await call(bob, 'notes_whoami')).toBe('whoami as bob');
    const revoked = await cli(['connect', '--revoke', 'notes'], { AGENT_API_TOKEN: keys.bob });
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(await call(bob, 'notes_whoami')).toContain('Toolset notes: connect your own account');
    await bob.close();
    const link = await cli(['connect', 'notes']);
    expect(link.stdout).toContain(`${urls['agent-server']}/console/connect/notes`);
    const audit = await cli(['audit', '--json', '--limit', '200']);
    const kinds = (
      JSON.parse(audit.stdout) as { audit: { kind: string; subject: string; detail: string | null }[] }
    ).audit.filter((r) => r.kind === 'grant' || r.kind === 'drop');
    expect(kinds).toContainEqual(
      expect.objectContaining({ kind: 'grant', subject: 'notes', detail: 'scopes: notes:read' }),
    );
    expect(kinds).toContainEqual(expect.objectContaining({ kind: 'drop', subject: 'notes_rw' }));
    expect(kinds).toContainEqual(expect.objectContaining({ kind: 'drop', subject: 'notes' }));
    // Not in an answer, the audit (one of the answers) or the database, where grants are sealed.
    const files = (await readdir(data)).filter((f) => f.startsWith('identity.db'));
    const stored = await Promise.all(files.map((f) => readFile(path.join(data, f))));
    const everything = answers.join('\n');
    for (const token of upstream.state.tokens) {
      expect(everything.includes(token)).toBe(false);
      for (const bytes of stored) expect(bytes.includes(token)).toBe(false);
    }
  });
});
