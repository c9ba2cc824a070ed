import type { Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { html } from 'hono/html';
import { callRoute } from '../../lib/http/http-client.ts';
import { gatewayRoutes } from '../../mcp-gateway/contract.ts';
import { attempt } from './overview.ts';
import type { Html } from './pages.ts';

// Connecting a person's own account at a toolset's upstream (issue 37): /console/connect/<toolset> starts it with
// the login's own key — for an OAuth toolset the browser goes on to the server's consent page; for one that takes
// secrets, the page says how to set them with the CLI — and the server sends the browser back to
// /console/connect/callback, which completes it with the same login's key (a state is good for its own user
// only, once). That return comes from another site, a navigation the login's SameSite=Strict cookie does not come
// with: the callback answers it with a page whose own navigation back to the callback does.

export const CONNECT_CALLBACK = '/console/connect/callback';

/** Which toolset the flow under way is for, kept in the browser between the start and the callback. */
const TOOLSET_COOKIE = 'toolshift_connect';
const FLOW_SECONDS = 600;

interface ConnectDeps {
  /** The gateway as the logged-in person, and who they are (undefined: a login made with a service token). */
  viewOf: (c: Context) => { gateway: Parameters<typeof callRoute>[0]; user?: unknown };
  page: (c: Context, title: string, section: 'toolsets', body: Html) => Response | Promise<Response>;
}

const problem = (message: string) => html`<p class="flash error" role="alert">${message}</p>`;

export function installConnect(app: Hono, deps: ConnectDeps): void {
  const { viewOf, page } = deps;
  const refuse = (c: Context, message: string) => page(c, 'Connect', 'toolsets', problem(message));

  app.get(CONNECT_CALLBACK, async (c) => {
    c.header('cache-control', 'no-store');
    const login = c.get('consoleLogin');
    // Back from the server's site without the login's cookie: once more, as this site's own navigation.
    if (!login && c.req.header('sec-fetch-site') === 'cross-site') return c.html(againPage(c.req.url));
    if (!login) return c.redirect('/console/login', 302);
    const toolset = getCookie(c, TOOLSET_COOKIE);
    deleteCookie(c, TOOLSET_COOKIE, { path: '/console/connect' });
    const [code, state, error] = [c.req.query('code'), c.req.query('state'), c.req.query('error')];
    if (!toolset)
      return refuse(c, 'No connection was started in this browser, or it took over 10 minutes: start again.');
    if (error !== undefined || !code || !state) {
      const said = (c.req.query('error_description') ?? error ?? 'no code').slice(0, 300);
      return refuse(c, `The server did not connect your account for ${toolset}: ${said}`);
    }
    const done = await attempt(
      callRoute(viewOf(c).gateway, gatewayRoutes.completeConnection, {
        params: { toolset },
        body: { code: code.slice(0, 4096), state: state.slice(0, 512) },
      }),
    );
    if (!done.ok) return refuse(c, `Connecting ${toolset} failed: ${done.error}`);
    const scopes = done.value.scopes.join(' ') || 'no particular scope';
    return page(
      c,
      'Connected',
      'toolsets',
      html`<p class="flash" role="status">Your account is connected for <strong>${toolset}</strong> (${scopes}).</p>
        <p><a href="/console/toolsets">Back to the toolsets</a></p>`,
    );
  });

  app.get('/console/connect/:toolset', async (c) => {
    const toolset = c.req.param('toolset').slice(0, 64);
    const view = viewOf(c);
    if (!view.user) {
      return refuse(c, "Connecting your own account needs a person's login (a user's key, or signing in).");
    }
    // A toolset that takes the person's own secrets instead: how to set them (never typed into a web page).
    const mine = await attempt(callRoute(view.gateway, gatewayRoutes.listConnections));
    const info = mine.ok ? mine.value.connections.find((x) => x.toolset === toolset) : undefined;
    if (info && info.scopes === undefined) return page(c, 'Connect', 'toolsets', secretsHelp(toolset, info));
    const scopes = (c.req.query('scope') ?? '').split(' ').filter(Boolean).slice(0, 100);
    const redirect = `${new URL(c.req.url).protocol}//${c.req.header('host')}${CONNECT_CALLBACK}`;
    const started = await attempt(
      callRoute(view.gateway, gatewayRoutes.startConnection, {
        params: { toolset },
        body: { redirect_uri: redirect, ...(scopes.length > 0 ? { scopes } : {}) },
      }),
    );
    if (!started.ok) return refuse(c, started.error);
    // Lax: the server sends the browser back from its own site, a navigation a Strict cookie would not come with.
    setCookie(c, TOOLSET_COOKIE, toolset, {
      httpOnly: true,
      sameSite: 'Lax',
      path: '/console/connect',
      secure: redirect.startsWith('https:'),
      maxAge: FLOW_SECONDS,
    });
    return c.redirect(started.value.authorization_url, 302);
  });
}

/** How a person sets their own secrets of a toolset with the CLI, and which they still have to. */
function secretsHelp(toolset: string, info: { connected: boolean; missing: string[] }) {
  const name = info.missing[0] ?? 'NAME';
  return html`<p>Toolset <strong>${toolset}</strong> takes your own API key, set from a terminal (it is read from
      stdin, kept sealed, and never shown again):</p>
    <pre>printf %s "$VALUE" | AGENT_API_TOKEN=&lt;your key&gt; toolshift secrets set ${toolset} ${name}</pre>
    <p class="muted">
      ${info.connected ? 'You have set yours.' : `Still to set: ${info.missing.join(', ')}.`}
      <a href="/console/toolsets">Back to the toolsets</a>
    </p>`;
}

/** A page that comes back to `url` as this site's own navigation (which the login's cookie comes with). */
function againPage(url: string) {
  const path = new URL(url);
  const here = `${path.pathname}${path.search}`;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta http-equiv="refresh" content="0;url=${here}" />
        <title>Connecting · toolshift</title>
      </head>
      <body>
        <p>Connecting your account… <a href="${here}">Continue</a>.</p>
      </body>
    </html>`;
}
