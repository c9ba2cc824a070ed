import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockModel } from '../../bench/mock-model.ts';
import { type CliIo, main } from '../../client.ts';
import { startAuthorizationServer } from '../helpers/authorization-server.ts';
import { launchChromium } from '../helpers/browser.ts';
import { freePort } from '../helpers/chaos-stack.ts';
import { startDaemon } from '../helpers/daemon.ts';

// Signing in to the console with an identity provider, whole, in real Chromium: the daemon as `npm start` runs it
// (its own process), a real OpenID provider (oidc-provider) on another loopback port, its own login and consent
// pages. A person the operator's rule admits is made a user on first sign-in and sees their own work; one it does
// not is refused and no user is made; the token login stays for the operator.

const SHOTS = process.env.CONSOLE_SCREENSHOTS;

let tmp: string;
let data: string;
let daemon: ReturnType<typeof startDaemon>;
let idp: Awaited<ReturnType<typeof startAuthorizationServer>>;
let model: Awaited<ReturnType<typeof startMockModel>>;
let browser: Awaited<ReturnType<typeof launchChromium>>;
let consoleUrl: string;

/** The CLI as the operator runs it on the daemon's machine (its stored admin token). */
async function cli(...argv: string[]) {
  let stdout = '';
  const io: CliIo = {
    stdout: (t) => {
      stdout += t;
    },
    stderr: () => {},
    env: { TOOLSHIFT_DATA_DIR: data, HOME: tmp },
  };
  const code = await main(argv, io);
  return { code, stdout };
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'sign-in-'));
  data = path.join(tmp, 'data');
  const ws = path.join(tmp, 'ws');
  await mkdir(ws, { recursive: true });
  const port = await freePort();
  consoleUrl = `http://127.0.0.1:${port}`;
  idp = await startAuthorizationServer(
    {
      alice: { email: 'alice@example.com', email_verified: true, preferred_username: 'Alice' },
      bob: { email: 'bob@partner.org', email_verified: true, groups: ['toolshift-users'] },
      eve: { email: 'eve@elsewhere.org', email_verified: true, groups: ['other'] },
      mallory: { email: 'mallory@example.com', email_verified: false },
    },
    [
      {
        client_id: 'toolshift-console',
        client_secret: 'console-secret-for-the-test',
        redirect_uris: [`${consoleUrl}/console/oidc/callback`],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
  );
  model = await startMockModel({ script: (key) => ({ answer: `done ${key}` }) });
  daemon = startDaemon({
    TOOLSHIFT_DATA_DIR: data,
    FS_ROOTS: ws,
    HOME: tmp,
    AGENT_PORT: String(port),
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test',
    OIDC_ISSUER: idp.issuer,
    OIDC_CLIENT_ID: 'toolshift-console',
    OIDC_CLIENT_SECRET: 'console-secret-for-the-test',
    OIDC_ALLOW: '@example.com, group:toolshift-users',
  });
  await daemon.listening;
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  daemon?.child.kill('SIGTERM');
  await daemon?.exited;
  await idp?.close();
  await model?.close();
  await rm(tmp, { recursive: true, force: true });
});

/** Signs in as `login` at the provider's own pages, from the console's login page; where the browser ends up. */
async function signIn(page: Page, login: string): Promise<void> {
  // Out of the provider's own session (and the console's), so its login page asks who this is.
  await browser.context.clearCookies();
  await page.goto(`${consoleUrl}/console/login`);
  await page.getByRole('link', { name: /Sign in with 127\.0\.0\.1/ }).click();
  await page.waitForURL((u) => u.href.startsWith(idp.issuer));
  await page.locator('input[name=login]').fill(login);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('button.login-submit').click();
  // The consent page, the first time this person meets the client.
  const consent = page.locator('button.login-submit', { hasText: 'Continue' });
  await Promise.race([
    consent.click({ timeout: 10_000 }),
    page.waitForURL((u) => u.href.startsWith(consoleUrl), { timeout: 10_000 }),
  ]).catch(() => undefined);
  await page.waitForURL((u) => u.href.startsWith(consoleUrl));
}

describe('signing in to the console with an OpenID provider', () => {
  it('makes a person of the allowed domain a user at first sign-in, and shows them as themselves', async () => {
    const page = await browser.context.newPage();
    await signIn(page, 'alice');
    await page.waitForURL(`${consoleUrl}/console/`);
    await expect.poll(() => page.locator('.who .user').textContent()).toBe('alice');
    await expect(page.locator('.who .role').textContent()).resolves.toBe('runner');
    if (SHOTS) await page.screenshot({ path: path.join(SHOTS, 'sign-in-signed-in.png') });
    const users = await cli('users', 'list', '--json');
    const alice = (JSON.parse(users.stdout) as { name: string; email: string }[]).find(
      (u) => u.name === 'alice',
    );
    expect(alice?.email).toBe('alice@example.com');
    // Her login acts with a key of hers, made for it: it is listed, and it ends at log out.
    const keys = JSON.parse((await cli('keys', 'list', '--user', 'alice', '--json')).stdout) as {
      id: string;
      label: string;
      revoked_at: string | null;
    }[];
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ label: 'console sign-in', revoked_at: null });
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${consoleUrl}/console/login`);
    const after = JSON.parse((await cli('keys', 'list', '--user', 'alice', '--json')).stdout) as {
      revoked_at: string | null;
    }[];
    expect(after[0].revoked_at).not.toBeNull();
    await page.goto(`${consoleUrl}/console/`);
    await page.waitForURL(/\/console\/login/);
    await page.close();
  });

  it('lets a person in by a group claim, and a second sign-in is the same user', async () => {
    const page = await browser.context.newPage();
    await signIn(page, 'bob');
    await expect.poll(() => page.locator('.who .user').textContent()).toBe('bob');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${consoleUrl}/console/login`);
    await signIn(page, 'bob');
    await expect.poll(() => page.locator('.who .user').textContent()).toBe('bob');
    const users = JSON.parse((await cli('users', 'list', '--json')).stdout) as { name: string }[];
    expect(users.filter((u) => u.name.startsWith('bob')).map((u) => u.name)).toEqual(['bob']);
    // The key of the login he logged out of was revoked at log out, and deleted by the next sign-in.
    const keys = JSON.parse((await cli('keys', 'list', '--user', 'bob', '--json')).stdout) as {
      revoked_at: string | null;
    }[];
    expect(keys.map((k) => k.revoked_at)).toEqual([null]);
    await page.close();
  });

  it('refuses a person outside the rule, and one whose email is not verified, saying why; no user is made', async () => {
    for (const [login, email] of [
      ['eve', 'eve@elsewhere.org'],
      ['mallory', 'mallory@example.com'],
    ]) {
      const page = await browser.context.newPage();
      await signIn(page, login);
      const said = await page.locator('.flash.error').textContent();
      expect(said).toContain(`${email} is not a user here`);
      expect(said).toContain('a verified email at example.com or group toolshift-users');
      await page.goto(`${consoleUrl}/console/`);
      await page.waitForURL(/\/console\/login/);
      await page.close();
    }
    const users = JSON.parse((await cli('users', 'list', '--json')).stdout) as { name: string }[];
    expect(users.map((u) => u.name)).not.toContain('eve');
    expect(users.map((u) => u.name)).not.toContain('mallory');
  });

  it('keeps a removed user out, and refuses a callback the browser did not start', async () => {
    expect((await cli('users', 'remove', 'bob')).code).toBe(0);
    const page = await browser.context.newPage();
    await signIn(page, 'bob');
    expect(await page.locator('.flash.error').textContent()).toContain('removed by the operator');
    // A code and state from elsewhere (a login CSRF): no flow of this browser's, nothing signed in.
    await page.goto(`${consoleUrl}/console/oidc/callback?code=forged&state=forged`);
    expect(await page.locator('.flash.error').textContent()).toContain('was not started in this browser');
    await page.close();
    const users = JSON.parse((await cli('users', 'list', '--json')).stdout) as { name: string }[];
    expect(users.map((u) => u.name)).not.toContain('bob');
  });

  it('takes the provider coming back from another site, there only, and only for the flow this browser started', async () => {
    // What a browser sends navigating here from another site's page (fetch() would set its own Sec-Fetch-Mode).
    const navigate = (to: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const headers = {
          'sec-fetch-site': 'cross-site',
          'sec-fetch-mode': 'navigate',
          'sec-fetch-dest': 'document',
        };
        get(`${consoleUrl}${to}`, { headers }, (res) => {
          let body = '';
          res.on('data', (c) => {
            body += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        }).on('error', reject);
      });
    const back = await navigate('/console/oidc/callback?code=c&state=s');
    expect(back.status).toBe(400);
    expect(back.body).toContain('was not started in this browser');
    expect((await navigate('/console/login')).status).toBe(403);
    // A link that puts the provider's words on the login page, with no flow of this browser's: not shown.
    const words = await navigate(
      '/console/oidc/callback?state=s&error=access_denied&error_description=Your+account+is+locked,+call+555',
    );
    expect(words.status).toBe(400);
    expect(words.body).not.toContain('call 555');
  });

  it('keeps the token login for the operator', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${consoleUrl}/console/login`);
    const token = (await cli('token', 'admin')).stdout.trim();
    await page.locator('input[name=token]').fill(token);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${consoleUrl}/console/`);
    await expect(page.locator('.who .role').textContent()).resolves.toBe('operator');
    expect(await page.locator('.who .user').count()).toBe(0);
    await page.close();
  });
});
