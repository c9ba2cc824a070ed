import type { Hono } from 'hono';
import { html } from 'hono/html';
import { z } from 'zod';
import { HttpError, type RouteSpec, route } from '../../lib/http/http.ts';
import type { OidcSignIn } from './oidc.ts';
import { loginPage } from './pages.ts';
import { LINK_MS, type Logins, ROLE_NAMES } from './sessions.ts';
import { VERSION } from './static-files.ts';

// The console's way in: the login page (and the one-time links it redeems), logging in with a token, minting a
// link for the CLI's `toolshift console`, and logging out. The logins themselves are in sessions.ts.

const Token = z.strictObject({ token: z.string().min(1).max(512) });

/**
 * The console's JSON routes, read and checked by lib/http/http.ts as every contract route is (body limits, JSON
 * depth, the schema's message); they are the console's own, not part of the agent-server's API document.
 */
const consoleRoutes = {
  login: {
    method: 'post',
    path: '/console/login',
    summary: 'Log in with a token',
    body: Token,
    responses: {},
  },
  link: {
    method: 'post',
    path: '/console/links',
    summary: 'A one-time login link',
    body: Token,
    responses: {},
  },
} satisfies Record<string, RouteSpec>;

/** The login page, log in, a one-time link, log out; signing in with the identity provider when it is set up. */
export function installLogin(app: Hono, logins: Logins, signIn?: OidcSignIn): void {
  const opts = signIn ? { signIn: signIn.label } : {};
  signIn?.install(app);
  app.get('/console/login', async (c) => {
    c.header('cache-control', 'no-store');
    const code = c.req.query('code');
    if (code !== undefined) {
      // A link is opened from outside the browser (a terminal, a chat): a page of another port on this host,
      // which the browser calls same-site, must not log the user in (or out of their own login) with its code.
      const site = c.req.header('sec-fetch-site');
      if (site !== undefined && site !== 'none' && site !== 'same-origin')
        throw new HttpError(403, 'A login link works when opened directly, not from another page');
      if (await logins.redeem(c, code)) return c.redirect('/console/', 303);
      return c.html(
        loginPage(
          VERSION,
          html`This login link was used already or has expired (links work once, for 10 minutes): log in with a
            token, or run <code>npx toolshift console</code> for a new link.`,
        ),
        401,
      );
    }
    if (c.get('principal')) return c.redirect('/console/', 303);
    return c.html(loginPage(VERSION, undefined, opts));
  });

  route(app, consoleRoutes.login, async (c, { body: { token } }) => {
    const role = await logins.logIn(c, token);
    c.header('cache-control', 'no-store');
    return c.json({ role: ROLE_NAMES[role] ?? role });
  });

  route(app, consoleRoutes.link, async (c, { body: { token } }) => {
    const link = await logins.link(token);
    const origin = `${new URL(c.req.url).protocol}//${c.req.header('host')}`;
    c.header('cache-control', 'no-store');
    return c.json({
      url: `${origin}/console/login?code=${link.code}`,
      role: ROLE_NAMES[link.role] ?? link.role,
      expires_at: new Date(link.expires_at).toISOString(),
      valid_s: LINK_MS / 1000,
    });
  });

  app.post('/console/logout', async (c) => {
    await logins.logOut(c);
    return c.json({ logged_out: true });
  });
}
