import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

// Real headless Chromium for the console's tests: Debian's `chromium` package (installed by .ci/run), driven
// by playwright-core, which downloads nothing. A fresh profile per launch.

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Chromium with a fresh user-data-dir; `hosts` maps names to 127.0.0.1 (a foreign origin or Host, locally). */
export async function launchChromium(
  opts: { hosts?: string[]; colorScheme?: 'light' | 'dark' } = {},
): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = await mkdtemp(path.join(tmpdir(), 'toolshift-chromium-'));
  const rules = (opts.hosts ?? []).map((h) => `MAP ${h} 127.0.0.1`).join(', ');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
      ...(rules ? [`--host-resolver-rules=${rules}`] : []),
    ],
    viewport: { width: 1280, height: 860 },
    colorScheme: opts.colorScheme ?? 'light',
    timezoneId: 'UTC',
    reducedMotion: 'reduce',
  });
  return {
    context,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/**
 * A TCP proxy in front of a service, which the test can cut: every open connection destroyed at once (a
 * dropped network, as a browser sees it). It keeps the first bytes of each connection (the request head).
 */
export async function startCuttableProxy(target: { host: string; port: number }) {
  const open = new Set<Socket>();
  const heads: string[] = [];
  const server: Server = createServer((client) => {
    const upstream = new (client.constructor as typeof Socket)();
    upstream.connect(target.port, target.host);
    open.add(client);
    open.add(upstream);
    let first = true;
    client.on('data', (chunk: Buffer) => {
      if (first) heads.push(chunk.toString('latin1').split('\r\n\r\n')[0]);
      first = false;
    });
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    /** Request heads seen so far (method, path, headers), oldest first. */
    heads,
    /** Destroys every open connection; returns how many. */
    cut(): number {
      const n = open.size;
      for (const s of open) s.destroy();
      open.clear();
      return n;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
