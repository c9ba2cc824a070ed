import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Hono } from 'hono';
import { secureHeaders } from 'hono/secure-headers';
import { HttpError } from '../../lib/http/http.ts';
import { CONSOLE_PREFIX } from './sessions.ts';

// The console's stylesheet, scripts and icon, served with long-lived URLs versioned by their hash, and the
// headers every console page is sent with.

/** The stylesheet and scripts, read once; their hash versions their URLs. */
const script = (name: string) => ({ type: 'text/javascript; charset=utf-8', body: asset(name) });
const asset = (name: string) => readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');
const ASSETS = {
  // console.js imports lib.js, task.js and thread.js (ES modules, same origin: the CSP's script-src 'self').
  'console.js': script('console.js'),
  'lib.js': script('lib.js'),
  'task.js': script('task.js'),
  'thread.js': script('thread.js'),
  'console.css': {
    type: 'text/css; charset=utf-8',
    body: readFileSync(new URL('./assets/console.css', import.meta.url), 'utf8'),
  },
  'icon.svg': {
    type: 'image/svg+xml',
    body: readFileSync(new URL('./assets/icon.svg', import.meta.url), 'utf8'),
  },
};
export const VERSION = createHash('sha256')
  .update(
    Object.values(ASSETS)
      .map((a) => a.body)
      .join('\0'),
  )
  .digest('hex')
  .slice(0, 12);

/** Only the console's own script and stylesheet; nothing inline, nothing from elsewhere, no framing. */
const pageHeaders = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'"],
    connectSrc: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
    baseUri: ["'none'"],
    requireTrustedTypesFor: ["'script'"],
  },
  strictTransportSecurity: false,
  referrerPolicy: 'no-referrer',
});

/** The headers of every console page, and the stylesheet, scripts and icon at /console/assets/:name. */
export function installStaticFiles(app: Hono): void {
  app.use(`${CONSOLE_PREFIX}/*`, pageHeaders);
  app.use(CONSOLE_PREFIX, pageHeaders);
  app.get(CONSOLE_PREFIX, (c) => c.redirect('/console/', 303));
  app.get('/console/assets/:name', (c) => {
    const name = c.req.param('name');
    const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name as keyof typeof ASSETS] : undefined;
    if (!asset) throw new HttpError(404, 'No such console asset');
    c.header('content-type', asset.type);
    c.header(
      'cache-control',
      c.req.query('v') === VERSION ? 'public, max-age=31536000, immutable' : 'no-cache',
    );
    return c.body(asset.body);
  });
}
