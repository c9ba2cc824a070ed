import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startStack } from '../../start/stack.ts';
import { launchChromium } from '../helpers/browser.ts';
import { chunk } from '../helpers/msw.ts';

// A thread in the console, in real headless Chromium against the three services on loopback: its turns made
// through the API, a new one sent from the page's form, its reply streaming into the page, then its answer.
// CONSOLE_SCREENSHOTS=<dir> saves the thread page.

const TOKENS = {
  AGENT_API_TOKEN: 'ts_api_console-threads-approver-token',
  GATEWAY_ADMIN_TOKEN: 'ts_admin_console-threads-operator-token',
  GATEWAY_AGENT_TOKEN: 'ts_agent_console-threads-agent-token',
  VIEWER_TOKEN: 'ts_viewer_console-threads-viewer-token',
  TOOL_SERVER_TOKEN: 'ts_toolserver_console-threads-token',
};

let tmp: string;
let services: Listening[] = [];
let model: Server;
let base: string;
let browser: Awaited<ReturnType<typeof launchChromium>>;
const problems: string[] = [];
function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { opened, open };
}
/** A reply that holds (its goal says so) starts once `started` opens, and ends once `released` does. */
const started = gate();
const released = gate();

/** Streams `Thinking about <goal>: done.`; a goal with "hold" waits for the gates before and after its first words. */
function streamingModel(): Server {
  return createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', async () => {
      const { messages } = JSON.parse(body) as { messages: { role: string; content: string }[] };
      const goal = messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
      if (goal.includes('hold')) await started.opened;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const send = (item: unknown) => res.write(`data: ${JSON.stringify(item)}\n\n`);
      send(chunk({ role: 'assistant', content: 'Thinking about ' }));
      if (goal.includes('hold')) await released.opened;
      send(chunk({ content: `<i>${goal}</i>: done.` }));
      send(chunk({}, { finish_reason: 'stop' }));
      send(chunk(null, { usage: { prompt_tokens: 100, completion_tokens: 10 } }));
      res.end('data: [DONE]\n\n');
    });
  });
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'console-threads-'));
  await mkdir(path.join(tmp, 'ws'));
  model = streamingModel();
  await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
  const config = loadConfig({
    ...TOKENS,
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    FS_ROOTS: path.join(tmp, 'ws'),
    OPENAI_BASE_URL: `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`,
    OPENAI_API_KEY: 'sk-test',
    LOG_LEVEL: 'silent',
    AGENT_PRIME_TOOLSETS: 'false',
  });
  const { tools, gateway, agent } = await startStack(config);
  services = [agent, gateway, tools];
  base = agent.url;
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  started.open();
  released.open();
  await browser?.close();
  for (const s of services) await s.close();
  model?.closeAllConnections();
  await new Promise((r) => model?.close(r));
  await rm(tmp, { recursive: true, force: true });
});

/** A task through the API as the approver, waited for; its thread. */
async function ask(goal: string, threadId?: string): Promise<string> {
  const res = await fetch(`${base}/agent/execute_task`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKENS.AGENT_API_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ goal, ...(threadId ? { thread_id: threadId } : {}) }),
  });
  const body = (await res.json()) as { thread_id: string; status: string };
  expect(body.status).toBe('completed');
  return body.thread_id;
}

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

describe('a thread in the console', () => {
  it('lists the turns, streams a new turn sent from its form, then shows its answer', async () => {
    const thread = await ask('first question');
    await ask('second question', thread);
    const page = await loggedIn(TOKENS.AGENT_API_TOKEN);

    await page.click('nav a:has-text("Threads")');
    const row = page.locator(`tr[data-thread-row="${thread}"]`);
    expect(await row.textContent()).toContain('first question');
    await row.locator('a').click();
    await page.waitForURL(`${base}/console/threads/${thread}`);
    expect(await page.textContent('h1')).toBe('first question');
    const turns = page.locator('[data-turn]');
    expect(await turns.count()).toBe(2);
    // The answers as text: the model's markup is escaped, never drawn.
    expect(await turns.nth(1).locator('[data-answer]').textContent()).toBe(
      'Thinking about <i>second question</i>: done.',
    );
    expect(await page.locator('[data-answer] i').count()).toBe(0);
    const taskLink = await turns.nth(0).locator('a').getAttribute('href');
    expect(taskLink).toMatch(/^\/console\/tasks\/task_/);

    // Continued from the page: the new turn runs, its reply streams in, then it ends with its answer.
    await page.fill('textarea[name=goal]', 'hold on, a third');
    await page.click('form[data-continue] button[type=submit]');
    // The streamed text is never stored: the model writes once the page follows the turn.
    const live = page.locator('[data-turn][data-live][data-following]');
    await expect.poll(() => live.count(), { timeout: 15_000 }).toBe(1);
    started.open();
    await expect
      .poll(() => live.locator('[data-answer]').textContent(), { timeout: 15_000 })
      .toBe('Thinking about ');
    if (process.env.CONSOLE_SCREENSHOTS) {
      await mkdir(process.env.CONSOLE_SCREENSHOTS, { recursive: true });
      await page.screenshot({
        path: path.join(process.env.CONSOLE_SCREENSHOTS, 'thread-light.png'),
        fullPage: true,
        animations: 'disabled',
      });
    }
    released.open();
    const third = page.locator('[data-turn][data-ended="completed"]');
    await expect.poll(() => third.count(), { timeout: 15_000 }).toBe(1);
    expect(await third.locator('[data-answer]').textContent()).toBe(
      'Thinking about <i>hold on, a third</i>: done.',
    );
    expect(await third.locator('[data-turn-status]').textContent()).toBe('completed');
    expect(await turns.count()).toBe(3);
    const api = await fetch(`${base}/agent/threads/${thread}`, {
      headers: { authorization: `Bearer ${TOKENS.AGENT_API_TOKEN}` },
    });
    const { turns: stored } = (await api.json()) as { turns: { goal: string }[] };
    expect(stored.map((t) => t.goal)).toEqual(['first question', 'second question', 'hold on, a third']);
    // On a phone, neither page scrolls sideways.
    await page.setViewportSize({ width: 390, height: 860 });
    for (const p of [`/console/threads/${thread}`, '/console/threads']) {
      await page.goto(`${base}${p}`);
      expect(await page.evaluate(() => document.documentElement.scrollWidth), p).toBeLessThanOrEqual(390);
    }
    expect(problems).toEqual([]);
    await page.close();
  });

  it("gives a viewer no form, and another login's thread as missing", async () => {
    const thread = await ask('a private question');
    const operator = await loggedIn(TOKENS.GATEWAY_ADMIN_TOKEN);
    // The operator sees every thread, and may continue it.
    await operator.goto(`${base}/console/threads/${thread}`);
    expect(await operator.locator('form[data-continue]').count()).toBe(1);
    await operator.close();
    const page = await loggedIn(TOKENS.VIEWER_TOKEN);
    await page.goto(`${base}/console/threads`);
    expect(await page.textContent('main')).toContain('No thread yet');
    const res = await page.goto(`${base}/console/threads/${thread}`);
    expect(res?.status()).toBe(404);
    expect(await page.textContent('body')).toContain(`No thread ${thread}; /console/threads lists yours`);
    expect(await page.locator('form[data-continue]').count()).toBe(0);
    await page.close();
  });
});
