import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startStack } from '../../start/stack.ts';
import { launchChromium } from '../helpers/browser.ts';

// The People page in real headless Chromium against the three services on loopback: the operator adds a user,
// makes a key (shown once, gone on reload), revokes it, puts the user in a team and removes them; a viewer gets
// no link and a 403. CONSOLE_SCREENSHOTS=<dir> saves the page, light and dark: with a new key shown, and with its lists.

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
let browser: Awaited<ReturnType<typeof launchChromium>>;
const problems: string[] = [];

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
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  for (const s of services) await s.close();
  await rm(tmp, { recursive: true, force: true });
});

/** A page logged in with `token` (a script error or a policy violation fails the test). */
async function loggedIn(token: string): Promise<Page> {
  const page = await browser.context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  await browser.context.clearCookies();
  await page.goto(`${base}/console/login`);
  await page.fill('input[name=token]', token);
  await page.click('button[type=submit]');
  await page.waitForURL(`${base}/console/`);
  return page;
}

/** Clicks a button that asks first, and answers the question (`yes`: go on). */
async function confirmed(page: Page, button: ReturnType<Page['locator']>, yes: boolean) {
  await button.click();
  const dialog = page.locator('dialog[data-confirm-dialog]');
  await dialog.locator(`button[value="${yes ? 'yes' : 'no'}"]`).click();
  await expect.poll(() => dialog.count()).toBe(0);
}

const asKey = (key: string) => fetch(`${base}/agent/tasks`, { headers: { authorization: `Bearer ${key}` } });

async function screenshot(page: Page, name: string) {
  const dir = process.env.CONSOLE_SCREENSHOTS;
  if (!dir) return;
  await mkdir(dir, { recursive: true });
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({
      path: path.join(dir, `${name}-${scheme}.png`),
      fullPage: true,
      animations: 'disabled',
    });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

describe('the People page in a browser', () => {
  it('adds a user, shows a new key once, revokes it, and manages a team', async () => {
    const page = await loggedIn(TOKENS.GATEWAY_ADMIN_TOKEN);
    await page.click('nav a:has-text("People")');
    await page.waitForURL(`${base}/console/people`);

    await page.fill('input[name=name] >> nth=0', 'alice');
    await page.fill('input[name=email]', 'alice@example.org');
    await page.click('button:has-text("Add user")');
    await page.locator('tr[data-user="alice"]').waitFor();
    // The API's refusal, in its words.
    await page.fill('input[name=name] >> nth=0', 'alice');
    await page.click('button:has-text("Add user")');
    await expect.poll(() => page.textContent('.flash.error')).toBe('user alice already exists');

    // A key: its secret shown once, from the answer that made it.
    const label = '<script>alert(1)</script> laptop';
    await page.fill('form[data-show=key] input[name=user]', 'alice');
    await page.selectOption('select[name=role]', 'runner');
    await page.fill('input[name=expires_in]', '30d');
    await page.fill('input[name=label]', label);
    await page.click('button:has-text("Create key")');
    const secret = page.locator('[data-result=key] [data-secret]');
    await secret.waitFor();
    await expect.poll(() => page.textContent('.flash')).toMatch(/^Key [a-z0-9]{10} made for alice\.$/);
    const key = (await secret.textContent()) ?? '';
    expect(key).toMatch(/^tsk_[a-z0-9]{10}_/);
    expect(await page.textContent('[data-result=key]')).toMatch(/shown this once, never again/);
    expect((await asKey(key)).status).toBe(200);
    await page.fill('input[name=name] >> nth=0', 'bob');
    await page.fill('input[name=email]', 'bob@example.org');
    await screenshot(page, 'people-key');

    await page.reload();
    expect(await page.locator('[data-secret]').count()).toBe(0);
    // The secret is everything after tsk_<id>_ (it may hold '_' itself).
    expect(await page.content()).not.toContain(key.slice('tsk_'.length + 11));
    const row = page.locator(`tr[data-key="${key.split('_')[1]}"]`);
    expect(await row.locator('td').nth(3).textContent()).toBe(label);
    expect(await page.locator('main script').count()).toBe(0);

    // Revoked (after a question): refused from then on.
    await confirmed(page, row.locator('button:has-text("Revoke")'), true);
    await expect.poll(() => row.locator('.tag').textContent()).toBe('revoked');
    expect((await asKey(key)).status).toBe(401);

    // A team, a member in it and out again.
    await page.fill('input[name=name] >> nth=1', 'eng');
    await page.click('button:has-text("Add team")');
    const team = page.locator('tr[data-team="eng"]');
    await team.locator('input[name=user]').fill('alice');
    await team.locator('button:has-text("Add")').click();
    await expect.poll(() => team.locator('ul.members li').count()).toBe(1);
    await expect.poll(() => page.locator('tr[data-user="alice"] td').nth(2).textContent()).toBe('eng');
    await screenshot(page, 'people');
    await team.locator('ul.members button').click();
    await expect.poll(() => team.locator('ul.members li').count()).toBe(0);

    // Removing a user asks first: no is nothing.
    const alice = page.locator('tr[data-user="alice"]');
    await confirmed(page, alice.locator('button:has-text("Remove")'), false);
    expect(await alice.count()).toBe(1);
    await confirmed(page, alice.locator('button:has-text("Remove")'), true);
    await expect.poll(() => alice.count()).toBe(0);

    // On a phone, the page does not scroll sideways.
    await page.setViewportSize({ width: 390, height: 860 });
    await page.reload();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('gives a viewer no People link and a 403', async () => {
    const page = await loggedIn(TOKENS.VIEWER_TOKEN);
    expect(await page.locator('nav a:has-text("People")').count()).toBe(0);
    const res = await page.goto(`${base}/console/people`);
    expect(res?.status()).toBe(403);
    expect(await page.textContent('main')).toContain("The People page is the operator's");
    expect(problems).toEqual([]);
    await page.close();
  });
});
