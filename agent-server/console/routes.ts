import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Context, Hono } from 'hono';
import { html } from 'hono/html';
import { secureHeaders } from 'hono/secure-headers';
import { z } from 'zod';
import { HttpError, type RouteSpec, route } from '../../lib/http/http.ts';
import { callRoute, errorOf, type ServiceEndpoint } from '../../lib/http/http-client.ts';
import { AUDIT_KINDS, AuditSearch, gatewayRoutes } from '../../mcp-gateway/contract.ts';
import type { ModelHealth } from '../clients/model.ts';
import { TaskStatus } from '../contract.ts';
import type { TaskStore } from '../store/interface.ts';
import type { Agent } from '../tasks/agent.ts';
import { installActions } from './actions.ts';
import { approvalsPage } from './approvals-page.ts';
import { AUDIT_PAGE, auditPage } from './audit-page.ts';
import { attempt, loadOverview, type OverviewDeps } from './overview.ts';
import {
  type Can,
  type Frame,
  layout,
  loginPage,
  overviewPage,
  runPage,
  TASK_PAGE,
  taskPage,
  tasksPage,
} from './pages.ts';
import { CONSOLE_PREFIX, LINK_MS, type Logins, ROLE_NAMES } from './sessions.ts';
import { toolsetsPage } from './toolsets-page.ts';

// The web console, served by the agent-server at /console: pages rendered here from the agent's store and the
// gateway's contract routes (called with the logged-in user's own token, so the gateway decides what each role
// may do, as for the API), a stylesheet and three script modules; the operator's actions are in actions.ts.
// lib/http/security.ts lets a request in by its session cookie, a change only with the login's CSRF token.

export interface ConsoleDeps {
  agent: Agent;
  store: TaskStore;
  logins: Logins;
  /** The gateway, without credentials: each call carries the user's. */
  gateway: ServiceEndpoint;
  modelHealth?: () => ModelHealth;
  /** The model the tasks use, and the database in use, for the Overview. */
  model?: OverviewDeps['model'];
  database?: string;
}

/** The stylesheet and scripts, read once; their hash versions their URLs. */
const script = (name: string) => ({ type: 'text/javascript; charset=utf-8', body: asset(name) });
const asset = (name: string) => readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');
const ASSETS = {
  // console.js imports lib.js and task.js (ES modules, same origin: the CSP's script-src 'self').
  'console.js': script('console.js'),
  'lib.js': script('lib.js'),
  'task.js': script('task.js'),
  'console.css': {
    type: 'text/css; charset=utf-8',
    body: readFileSync(new URL('./assets/console.css', import.meta.url), 'utf8'),
  },
  'icon.svg': {
    type: 'image/svg+xml',
    body: readFileSync(new URL('./assets/icon.svg', import.meta.url), 'utf8'),
  },
};
const VERSION = createHash('sha256')
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

function parse<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new HttpError(400, `Invalid request body: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

export function installConsole(app: Hono, deps: ConsoleDeps): void {
  const { store, agent, logins } = deps;

  /** Who is logged in, what they may do, and the gateway as them. */
  const viewOf = (c: Context) => {
    const principal = c.get('principal');
    const login = c.get('consoleLogin');
    const role: string = login?.consoleRole ?? principal?.role ?? 'local';
    const bearer = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1];
    const token = login?.token ?? bearer;
    const can: Can = {
      run: role === 'local' || role === 'user' || role === 'admin',
      decide: role === 'local' || role === 'user' || role === 'admin',
      operate: role === 'local' || role === 'admin',
    };
    const gateway: ServiceEndpoint = {
      ...deps.gateway,
      timeoutMs: 10_000,
      headers: token ? { authorization: `Bearer ${token}` } : undefined,
    };
    return { role, can, gateway, csrf: login?.csrf };
  };

  const page = (c: Context, title: string, section: Frame['section'], body: ReturnType<typeof layout>) => {
    const view = viewOf(c);
    c.header('cache-control', 'no-store');
    return c.html(
      layout(
        {
          title,
          section,
          role: ROLE_NAMES[view.role] ?? view.role,
          csrf: view.csrf,
          version: VERSION,
          can: view.can,
        },
        body,
      ),
    );
  };

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
    return c.html(loginPage(VERSION));
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

  app.get('/console/', async (c) => {
    const view = viewOf(c);
    return page(c, 'Overview', 'overview', overviewPage(await loadOverview(deps, view.gateway)));
  });

  app.get('/console/toolsets', async (c) => {
    const view = viewOf(c);
    const listed = await attempt(callRoute(view.gateway, gatewayRoutes.listToolsets));
    if (!listed.ok)
      return page(c, 'Toolsets', 'toolsets', problem(`The gateway did not answer: ${listed.error}`));
    // Each toolset's definitions, as the gateway offers them (one that does not answer shows its tools' names).
    const tools = Object.fromEntries(
      await Promise.all(
        listed.value.toolsets.map(async (t) => {
          const got = await attempt(
            callRoute(view.gateway, gatewayRoutes.toolsetTools, { params: { id: t.id } }),
          );
          return [t.id, got.ok ? got.value.tools : undefined] as const;
        }),
      ),
    );
    return page(c, 'Toolsets', 'toolsets', toolsetsPage(listed.value.toolsets, view.can, tools));
  });

  const TaskQuery = z.object({
    status: z.union([TaskStatus, z.literal('')]).optional(),
    goal: z.string().max(200).optional(),
    after: z.string().max(64).optional(),
  });
  app.get('/console/tasks', async (c) => {
    const query = parse(TaskQuery, c.req.query());
    const filter = {
      status: query.status || undefined,
      goal: query.goal || undefined,
      after: query.after || undefined,
    };
    const tasks = await store.recentTasks(TASK_PAGE, filter);
    return page(c, 'Tasks', 'tasks', tasksPage(tasks, filter, TaskStatus.options));
  });

  app.get('/console/tasks/:id', async (c) => {
    const task = await store.getTask(c.req.param('id').slice(0, 64));
    if (!task)
      throw new HttpError(404, `No task ${c.req.param('id').slice(0, 64)}; /console/tasks lists them`);
    return page(c, `Task ${task.task_id}`, 'tasks', taskPage(task, viewOf(c).can));
  });

  app.get('/console/approvals', async (c) => {
    const view = viewOf(c);
    // The decisions are the gateway's record (who decided, when, why): the newest first.
    const [pending, history] = await Promise.all([
      agent.pendingApprovals(),
      attempt(callRoute(view.gateway, gatewayRoutes.listApprovals, { query: { limit: '100' } })),
    ]);
    const decided = history.ok ? history.value : { error: history.error };
    return page(c, 'Approvals', 'approvals', approvalsPage(pending, view.can, decided));
  });

  const AuditQuery = AuditSearch.extend({ cursor: z.string().max(20).optional() });
  /** The audit search as the form sends it: empty fields are absent. */
  const auditQuery = (c: Context) => {
    const given = Object.fromEntries(Object.entries(c.req.query()).filter(([, v]) => v !== ''));
    const parsed = AuditQuery.safeParse(given);
    return { given, parsed };
  };
  app.get('/console/audit', async (c) => {
    const view = viewOf(c);
    const { given, parsed } = auditQuery(c);
    if (!parsed.success) {
      const why = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      c.status(400);
      return page(
        c,
        'Audit',
        'audit',
        html`${problem(`Invalid search — ${why}`)}${auditPage([], null, given, AUDIT_KINDS)}`,
      );
    }
    const found = await attempt(
      callRoute(view.gateway, gatewayRoutes.listAudit, { query: { ...given, limit: String(AUDIT_PAGE) } }),
    );
    if (!found.ok) return page(c, 'Audit', 'audit', problem(`The gateway did not answer: ${found.error}`));
    return page(
      c,
      'Audit',
      'audit',
      auditPage(found.value.audit, found.value.next_cursor, given, AUDIT_KINDS),
    );
  });

  app.get('/console/audit/export', async (c) => {
    const view = viewOf(c);
    const { parsed } = auditQuery(c);
    if (!parsed.success) throw new HttpError(400, `Invalid audit search: ${parsed.error.issues[0]?.message}`);
    const { cursor: _, ...search } = parsed.data as Record<string, string>;
    const url = `${deps.gateway.baseUrl.replace(/\/$/, '')}/mcp/admin/audit/export?${new URLSearchParams(search)}`;
    const res = await (deps.gateway.fetch ?? fetch)(url, { headers: view.gateway.headers });
    if (!res.ok) throw await errorOf(res);
    return new Response(res.body, {
      headers: {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'content-disposition': 'attachment; filename="audit.jsonl"',
        'cache-control': 'no-store',
      },
    });
  });

  app.get('/console/run', async (c) => {
    const view = viewOf(c);
    const prompts = view.can.run
      ? await attempt(callRoute(view.gateway, gatewayRoutes.listPrompts))
      : undefined;
    return page(c, 'Run a task', 'run', runPage(prompts?.ok ? prompts.value.prompts : [], view.can));
  });

  installActions(app, viewOf);
}

/** A problem the page shows instead of (or above) its content. */
const problem = (message: string) => html`<p class="flash error" role="alert">${message}</p>`;
