import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import type { Listening } from '../../../lib/http/serve.ts';
import { startStack } from '../../../start/stack.ts';

// The console's People page, in process and without a browser: the operator's login (the operator's token, or
// an operator key) sees users, keys and teams and changes them through the gateway's admin API with its own
// token; a new key is in the answer that made it and never in a page; every other login gets no link and a 403;
// what people typed is escaped; a change without the CSRF token changes nothing. tests/console/people.test.ts
// drives the page in Chromium.

const TOKENS = {
  AGENT_API_TOKEN: 'ts_api_console-people-approver-token',
  GATEWAY_ADMIN_TOKEN: 'ts_admin_console-people-operator-token',
  GATEWAY_AGENT_TOKEN: 'ts_agent_console-people-agent-token',
  VIEWER_TOKEN: 'ts_viewer_console-people-viewer-token',
  TOOL_SERVER_TOKEN: 'ts_toolserver_console-people-token',
};

let tmp: string;
let services: Listening[] = [];
let base: string;
let origin: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'console-people-'));
  await mkdir(path.join(tmp, 'ws'));
  const config = loadConfig({
    ...TOKENS,
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    FS_ROOTS: path.join(tmp, 'ws'),
    LOG_LEVEL: 'silent',
  });
  const { tools, gateway, agent } = await startStack(config);
  services = [agent, gateway, tools];
  base = agent.url;
  origin = new URL(base).origin;
});

afterAll(async () => {
  for (const s of services) await s.close();
  await rm(tmp, { recursive: true, force: true });
});

type Login = { cookie: string; csrf: string };

async function logIn(token: string): Promise<Login & { overview: string }> {
  const res = await fetch(`${base}/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0];
  const overview = await (await fetch(`${base}/console/`, { headers: { cookie } })).text();
  const csrf = /<meta name="csrf-token" content="([^"]+)"/.exec(overview)?.[1] ?? '';
  return { cookie, csrf, overview };
}

/** A People action as console.js sends it: JSON, the login's cookie and CSRF token, from the console's origin. */
async function act(login: Login, action: string, body?: unknown) {
  const res = await fetch(`${base}/console/actions/people/${action}`, {
    method: 'POST',
    headers: {
      cookie: login.cookie,
      origin,
      'x-csrf-token': login.csrf,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, data: (await res.json()) as Record<string, unknown> };
}

const peoplePage = async (login: Login) => {
  const res = await fetch(`${base}/console/people`, { headers: { cookie: login.cookie } });
  return { status: res.status, text: await res.text() };
};

/** A bearer call of the agent-server's API. */
const asKey = (key: string) => fetch(`${base}/agent/tasks`, { headers: { authorization: `Bearer ${key}` } });

describe('the console’s People page', () => {
  it('lets the operator add a user and a key, shown once; revoked, the key is refused', async () => {
    const op = await logIn(TOKENS.GATEWAY_ADMIN_TOKEN);
    expect(op.overview).toContain('href="/console/people"');
    expect((await peoplePage(op)).text).toContain('No users yet');

    const hostile = '<script>alert(1)</script>@example.org';
    const added = await act(op, 'users', { name: 'alice', email: hostile });
    expect(added.status, JSON.stringify(added.data)).toBe(201);
    const made = await act(op, 'keys', {
      user: 'alice',
      role: 'runner',
      expires_in: '30d',
      label: '<img src=x onerror=alert(2)>',
    });
    expect(made.status, JSON.stringify(made.data)).toBe(201);
    expect(made.headers.get('cache-control')).toBe('no-store');
    const key = String(made.data.key);
    expect(key).toMatch(/^tsk_[a-z0-9]{10}_/);
    expect((await asKey(key)).status).toBe(200);

    // The page lists the key by its id, never its secret; what people typed is text.
    const page = (await peoplePage(op)).text;
    expect(page).toContain(`data-key="${made.data.id}"`);
    expect(page).not.toContain(key.slice('tsk_'.length + 11));
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;@example.org');
    expect(page).toContain('&lt;img src=x onerror=alert(2)&gt;');
    expect(page).not.toMatch(/<script>alert|<img src=x/);
    expect(page).toMatch(/<span class="tag ok">active<\/span>/);

    const revoked = await act(op, `keys/${made.data.id}/revoke`);
    expect(revoked.status).toBe(200);
    const refused = await asKey(key);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: string }).error).toMatch(/revoked/);
    const after = (await peoplePage(op)).text;
    expect(after).toMatch(/<span class="tag refused">revoked<\/span>/);
    expect(after).not.toContain(`data-post="/console/actions/people/keys/${made.data.id}/revoke"`);
  });

  it('shows the API’s refusals in its words, and manages teams and their members', async () => {
    const op = await logIn(TOKENS.GATEWAY_ADMIN_TOKEN);
    await act(op, 'users', { name: 'bob' });
    const again = await act(op, 'users', { name: 'bob' });
    expect(again.status).toBe(409);
    expect(again.data.error).toMatch(/bob/);
    const badName = await act(op, 'users', { name: '<script>x</script>' });
    expect(badName.status).toBe(400);
    expect(badName.data.error).toMatch(/a name is 1 to 64 lower-case letters/);
    const badExpiry = await act(op, 'keys', { user: 'bob', role: 'runner', expires_in: 'soon' });
    expect(badExpiry.status).toBe(400);
    expect(badExpiry.data.error).toMatch(/30d, 12h, 90m/);
    expect((await act(op, 'keys', { user: 'nobody', role: 'viewer' })).status).toBe(404);
    expect((await act(op, 'keys/aaaaaaaaaa/revoke')).status).toBe(404);
    expect((await act(op, 'teams/none/members', { user: 'bob' })).status).toBe(404);

    expect((await act(op, 'teams', { name: 'eng' })).status).toBe(201);
    expect((await act(op, 'teams/eng/members', { user: 'bob' })).status).toBe(200);
    const page = (await peoplePage(op)).text;
    const team = page.slice(page.indexOf('data-team="eng"'));
    expect(team).toContain('data-post="/console/actions/people/teams/eng/members/bob/remove"');
    expect(page.slice(page.indexOf('data-user="bob"'))).toMatch(/<td>eng<\/td>/);
    expect((await act(op, 'teams/eng/members/bob/remove')).status).toBe(200);
    expect((await act(op, 'teams/eng/remove')).status).toBe(200);
    expect((await act(op, 'users/bob/remove')).status).toBe(200);
    const gone = (await peoplePage(op)).text;
    expect(gone).not.toContain('data-team="eng"');
    expect(gone).not.toContain('data-user="bob"');
  });

  it('is the operator’s alone: other logins see no link and get a 403; an operator key opens it', async () => {
    const op = await logIn(TOKENS.GATEWAY_ADMIN_TOKEN);
    await act(op, 'users', { name: 'carol' });
    const keyOf = async (role: string) => String((await act(op, 'keys', { user: 'carol', role })).data.key);
    const others = [
      await logIn(TOKENS.VIEWER_TOKEN),
      await logIn(TOKENS.AGENT_API_TOKEN),
      await logIn(await keyOf('runner')),
      await logIn(await keyOf('viewer')),
      await logIn(await keyOf('approver')),
    ];
    for (const login of others) {
      expect(login.overview).not.toContain('/console/people');
      const page = await peoplePage(login);
      expect(page.status).toBe(403);
      expect(page.text).toContain('The People page is the operator&#39;s');
      const tried = await act(login, 'users', { name: 'mallory' });
      expect(tried.status).toBe(403);
    }
    const opKey = await logIn(await keyOf('operator'));
    expect(opKey.overview).toContain('href="/console/people"');
    const page = await peoplePage(opKey);
    expect(page.status).toBe(200);
    expect(page.text).toContain('data-user="carol"');
    expect(page.text).not.toContain('mallory');
  });

  it('changes nothing on a cross-site POST without the CSRF token', async () => {
    const op = await logIn(TOKENS.GATEWAY_ADMIN_TOKEN);
    const forged: Record<string, string>[] = [
      { origin: 'http://attacker.example', 'content-type': 'text/plain' },
      { origin, 'content-type': 'application/json' },
      { 'sec-fetch-site': 'cross-site', 'content-type': 'application/json' },
      { origin: 'http://attacker.example', 'x-csrf-token': op.csrf, 'content-type': 'application/json' },
    ];
    for (const headers of forged) {
      const res = await fetch(`${base}/console/actions/people/users`, {
        method: 'POST',
        headers: { cookie: op.cookie, ...headers },
        body: JSON.stringify({ name: 'eve' }),
      });
      expect(res.status).toBe(403);
    }
    expect((await peoplePage(op)).text).not.toContain('data-user="eve"');
  });
});
