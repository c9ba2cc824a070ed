import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import type { Listening } from '../../../lib/http/serve.ts';
import { startStack } from '../../../start/stack.ts';

// The console's door, in process and without a browser: what a login stores (no token, no secret on disk),
// what a cookie opens, and that every change made with it needs the CSRF token and the console's own origin.
// tests/console/ drives the same in Chromium.

const TOKENS = {
  AGENT_API_TOKEN: 'ts_api_console-test-approver-token',
  GATEWAY_ADMIN_TOKEN: 'ts_admin_console-test-operator-token',
  GATEWAY_AGENT_TOKEN: 'ts_agent_console-test-agent-token',
  VIEWER_TOKEN: 'ts_viewer_console-test-viewer-token',
  TOOL_SERVER_TOKEN: 'ts_toolserver_console-test-token',
};

let tmp: string;
let services: Listening[] = [];
let base: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'console-logins-'));
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
});

afterAll(async () => {
  for (const s of services) await s.close();
  await rm(tmp, { recursive: true, force: true });
});

/** Logs in with `token`; the cookie header to send back and the page's CSRF token. */
async function logIn(token: string) {
  const res = await fetch(`${base}/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  const setCookie = res.headers.get('set-cookie') ?? '';
  expect(setCookie).toMatch(/HttpOnly/);
  expect(setCookie).toMatch(/SameSite=Strict/);
  const cookie = setCookie.split(';')[0];
  const page = await (await fetch(`${base}/console/`, { headers: { cookie } })).text();
  const csrf = /<meta name="csrf-token" content="([^"]+)"/.exec(page)?.[1] ?? '';
  return { cookie, csrf, role: ((await res.json()) as { role: string }).role, page };
}

describe('console logins', () => {
  it('log in as the role of the token; the operator is vouched for by the gateway', async () => {
    expect((await logIn(TOKENS.VIEWER_TOKEN)).role).toBe('viewer');
    expect((await logIn(TOKENS.AGENT_API_TOKEN)).role).toBe('approver');
    expect((await logIn(TOKENS.GATEWAY_ADMIN_TOKEN)).role).toBe('operator');
    // Tokens that are not for people are refused, naming those that are.
    for (const token of [TOKENS.GATEWAY_AGENT_TOKEN, TOKENS.TOOL_SERVER_TOKEN, 'ts_admin_guess']) {
      const res = await fetch(`${base}/console/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
      });
      expect(res.status).toBe(401);
      const { error } = (await res.json()) as { error: string };
      expect(error).toMatch(/VIEWER_TOKEN.*AGENT_API_TOKEN.*GATEWAY_ADMIN_TOKEN/);
      // Shown on the login page as text: no markdown backticks.
      expect(error).not.toContain('`');
    }
    // The operator's token is still no bearer token of the agent-server: only a console login carries it.
    const bearer = await fetch(`${base}/agent/tasks`, {
      headers: { authorization: `Bearer ${TOKENS.GATEWAY_ADMIN_TOKEN}` },
    });
    expect(bearer.status).toBe(401);
  });

  it('store neither the token nor the cookie on disk, and serve no token in a page', async () => {
    const { cookie, page } = await logIn(TOKENS.GATEWAY_ADMIN_TOKEN);
    expect(page).not.toContain(TOKENS.GATEWAY_ADMIN_TOKEN);
    const secret = cookie.split('=')[1];
    const data = path.join(tmp, 'data');
    const files = (await readdir(data)).filter((f) => f.startsWith('agent.db'));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const bytes = await readFile(path.join(data, f));
      expect(bytes.includes(TOKENS.GATEWAY_ADMIN_TOKEN), f).toBe(false);
      expect(bytes.includes(secret), f).toBe(false);
    }
  });

  it('let a cookie read, and change only with the CSRF token from the console’s own origin', async () => {
    const { cookie, csrf } = await logIn(TOKENS.AGENT_API_TOKEN);
    expect(csrf).not.toBe('');
    expect((await fetch(`${base}/agent/tasks`, { headers: { cookie } })).status).toBe(200);
    const own = new URL(base).origin;
    // Cancelling a task that does not exist: 404 once the request is let in, 403 while it is not.
    const cancel = (headers: Record<string, string>) =>
      fetch(`${base}/agent/tasks/task_none/cancel`, { method: 'POST', headers: { cookie, ...headers } });
    const refused = [
      await cancel({ origin: own }),
      await cancel({ origin: own, 'x-csrf-token': `${csrf}x` }),
      await cancel({ 'x-csrf-token': csrf }),
      await cancel({ origin: 'http://127.0.0.1:1', 'x-csrf-token': csrf }),
      await cancel({ origin: 'null', 'x-csrf-token': csrf }),
      await cancel({ 'sec-fetch-site': 'same-site', 'x-csrf-token': csrf }),
    ];
    for (const res of refused) {
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: string }).error).toMatch(/CSRF|origin/i);
    }
    expect((await cancel({ origin: own, 'x-csrf-token': csrf })).status).toBe(404);
    expect((await cancel({ 'sec-fetch-site': 'same-origin', 'x-csrf-token': csrf })).status).toBe(404);
  });

  it('send a browser without a login to the login page, and refuse the API', async () => {
    const forged = 'toolshift_console_1=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const port = new URL(base).port;
    for (const cookie of ['', forged, `toolshift_console_${port}=forged`]) {
      const page = await fetch(`${base}/console/toolsets`, { headers: { cookie }, redirect: 'manual' });
      expect(page.status).toBe(303);
      expect(page.headers.get('location')).toBe('/console/login');
      expect((await fetch(`${base}/agent/tasks`, { headers: { cookie } })).status).toBe(401);
    }
  });

  it('end on logout, for every process (the row goes)', async () => {
    const { cookie, csrf } = await logIn(TOKENS.VIEWER_TOKEN);
    const out = await fetch(`${base}/console/logout`, {
      method: 'POST',
      headers: { cookie, origin: new URL(base).origin, 'x-csrf-token': csrf },
    });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/Max-Age=0/);
    expect((await fetch(`${base}/agent/tasks`, { headers: { cookie } })).status).toBe(401);
  });

  it('give a one-time link for a token, used once', async () => {
    const made = await fetch(`${base}/console/links`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: TOKENS.VIEWER_TOKEN }),
    });
    const { url, role } = (await made.json()) as { url: string; role: string };
    expect(role).toBe('viewer');
    expect(url).not.toContain(TOKENS.VIEWER_TOKEN);
    const first = await fetch(url, { redirect: 'manual' });
    expect(first.status).toBe(303);
    expect(first.headers.get('set-cookie')).toMatch(/HttpOnly/);
    const second = await fetch(url, { redirect: 'manual' });
    expect(second.status).toBe(401);
    expect(second.headers.get('set-cookie')).toBeNull();
  });

  it('refuse a viewer’s changes by role, and serve the console with a strict content security policy', async () => {
    const { cookie, csrf } = await logIn(TOKENS.VIEWER_TOKEN);
    const res = await fetch(`${base}/agent/execute_task`, {
      method: 'POST',
      headers: {
        cookie,
        origin: new URL(base).origin,
        'x-csrf-token': csrf,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ goal: 'anything' }),
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toMatch(/needs user credentials/);
    const page = await fetch(`${base}/console/`, { headers: { cookie } });
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(page.headers.get('cache-control')).toBe('no-store');
  });
});
