import type { Context, Hono } from 'hono';
import { html } from 'hono/html';
import { z } from 'zod';
import { HttpError } from '../../lib/http/http.ts';
import { callRoute, errorOf, type ServiceEndpoint } from '../../lib/http/http-client.ts';
import { callerOf, visibleUsers } from '../../lib/http/security.ts';
import { AUDIT_KINDS, AuditSearch, gatewayRoutes } from '../../mcp-gateway/contract.ts';
import type { ModelHealth } from '../clients/model.ts';
import { TaskStatus, ThreadId } from '../contract.ts';
import type { TaskStore } from '../store/interface.ts';
import type { Agent } from '../tasks/agent.ts';
import { approvalsInSight, ownerOfTask, threadDetail, threadView, visibleThread } from '../tasks/threads.ts';
import { installActions } from './actions.ts';
import { approvalsPage } from './approvals-page.ts';
import { AUDIT_PAGE, auditPage } from './audit-page.ts';
import { installConnect } from './connect.ts';
import { installLogin } from './door.ts';
import type { OidcSignIn } from './oidc.ts';
import { attempt, loadOverview, type OverviewDeps } from './overview.ts';
import {
  type Can,
  type Frame,
  layout,
  overviewPage,
  runPage,
  TASK_PAGE,
  taskPage,
  tasksPage,
} from './pages.ts';
import { installPeopleActions } from './people-actions.ts';
import { peoplePage } from './people-page.ts';
import { type Logins, ROLE_NAMES } from './sessions.ts';
import { installStaticFiles, VERSION } from './static-files.ts';
import { THREAD_PAGE, threadPage, threadsPage } from './threads-page.ts';
import { toolsetsPage } from './toolsets-page.ts';

// The web console, served by the agent-server at /console: pages rendered here from the agent's store and the
// gateway's contract routes (called with the logged-in user's own token, so the gateway decides what each role
// may do, as for the API); the stylesheet and scripts are in static-files.ts, logging in in door.ts and the
// operator's actions in actions.ts.
// lib/http/security.ts lets a request in by its session cookie, a change only with the login's CSRF token.

export interface ConsoleDeps {
  agent: Agent;
  store: TaskStore;
  logins: Logins;
  /** Signing in with the identity provider (OIDC_ISSUER), when it is set up. */
  signIn?: OidcSignIn;
  /** The gateway, without credentials: each call carries the user's. */
  gateway: ServiceEndpoint;
  modelHealth?: () => ModelHealth;
  /** The model the tasks use, and the database in use, for the Overview. */
  model?: OverviewDeps['model'];
  database?: string;
}

function parse<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new HttpError(400, `Invalid request body: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return parsed.data;
}

/** Installs the console's routes on the agent-server's app. */
export function installConsole(app: Hono, deps: ConsoleDeps): void {
  const viewOf = viewer(deps.gateway);
  const page = pageOf(viewOf);
  installStaticFiles(app);
  installLogin(app, deps.logins, deps.signIn);
  installPages(app, deps, viewOf, page);
  installAudit(app, deps, viewOf, page);
  installThreads(app, deps, viewOf, page);
  installPeople(app, viewOf, page);
  installActions(app, viewOf);
  installPeopleActions(app, viewOf);
  installConnect(app, { viewOf, page });
}

/** Who is logged in, what they may do, and the gateway as them. */
type ViewOf = ReturnType<typeof viewer>;

/** A page in the console's frame (the title, the section, the role, what the role may do). */
type Page = ReturnType<typeof pageOf>;

/** Who a request comes from: the login's role (or the token's), what it may do, and the gateway as them. */
function viewer(gatewayBase: ServiceEndpoint) {
  return (c: Context) => {
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
      ...gatewayBase,
      timeoutMs: 10_000,
      headers: token ? { authorization: `Bearer ${token}` } : undefined,
    };
    return { role, can, gateway, csrf: login?.csrf, user: login?.user };
  };
}

/** Renders a page in the console's frame, never cached. */
function pageOf(viewOf: ViewOf) {
  return (c: Context, title: string, section: Frame['section'], body: ReturnType<typeof layout>) => {
    const view = viewOf(c);
    c.header('cache-control', 'no-store');
    return c.html(
      layout(
        {
          title,
          section,
          // A user's login shows their key's role (a runner is not an approver), a token's the console's name of it.
          role: view.user?.role ?? ROLE_NAMES[view.role] ?? view.role,
          ...(view.user ? { user: view.user.user.name } : {}),
          csrf: view.csrf,
          version: VERSION,
          can: view.can,
        },
        body,
      ),
    );
  };
}

/**
 * What a login made with a user's key sees of the tasks: their own (an operator's key: everyone's). Other logins
 * (the services' tokens) see every task, as they always have.
 */
function ownOnly(c: Context): { owner?: string } {
  const caller = callerOf(c);
  return c.get('consoleLogin')?.user && !caller.all ? { owner: caller.owner } : {};
}

/** The pages: Overview, Toolsets, Tasks and a task, Approvals, Run. */
function installPages(app: Hono, deps: ConsoleDeps, viewOf: ViewOf, page: Page): void {
  const { store, agent } = deps;
  app.get('/console/', async (c) => {
    const view = viewOf(c);
    const scope = { owner: ownOnly(c).owner, visible: await visibleUsers(c) };
    return page(c, 'Overview', 'overview', overviewPage(await loadOverview(deps, view.gateway, scope)));
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
    // A person's own accounts: which toolsets take one, and whether they connected each (a Connect link).
    const mine = view.user
      ? await attempt(callRoute(view.gateway, gatewayRoutes.listConnections))
      : undefined;
    const connections = mine?.ok ? mine.value.connections : [];
    return page(c, 'Toolsets', 'toolsets', toolsetsPage(listed.value.toolsets, view.can, tools, connections));
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
    const tasks = await store.recentTasks(TASK_PAGE, { ...filter, ...ownOnly(c) });
    return page(c, 'Tasks', 'tasks', tasksPage(tasks, filter, TaskStatus.options));
  });

  app.get('/console/tasks/:id', async (c) => {
    const task = await store.getTask(c.req.param('id').slice(0, 64));
    const owner = ownOnly(c).owner;
    if (!task || (owner !== undefined && (await ownerOfTask(store, task.task_id)) !== owner))
      throw new HttpError(404, `No task ${c.req.param('id').slice(0, 64)}; /console/tasks lists them`);
    return page(c, `Task ${task.task_id}`, 'tasks', taskPage(task, viewOf(c).can));
  });

  app.get('/console/approvals', async (c) => {
    const view = viewOf(c);
    // The decisions are the gateway's record (who decided, when, why): the newest first.
    const [pending, history] = await Promise.all([
      agent.pendingApprovals().then(async (all) => approvalsInSight(store, all, await visibleUsers(c))),
      attempt(callRoute(view.gateway, gatewayRoutes.listApprovals, { query: { limit: '100' } })),
    ]);
    const decided = history.ok ? history.value : { error: history.error };
    return page(c, 'Approvals', 'approvals', approvalsPage(pending, view.can, decided));
  });

  app.get('/console/run', async (c) => {
    const view = viewOf(c);
    const prompts = view.can.run
      ? await attempt(callRoute(view.gateway, gatewayRoutes.listPrompts))
      : undefined;
    return page(c, 'Run a task', 'run', runPage(prompts?.ok ? prompts.value.prompts : [], view.can));
  });
}

/** The audit trail's page (searched, paged) and its export as JSON lines. */
function installAudit(app: Hono, deps: ConsoleDeps, viewOf: ViewOf, page: Page): void {
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
}

/** The threads: the login's own (the operator's: all), and one with its turns. */
function installThreads(app: Hono, { store }: ConsoleDeps, viewOf: ViewOf, page: Page): void {
  const ThreadsQuery = z.object({ after: z.union([ThreadId, z.literal('')]).optional() });
  app.get('/console/threads', async (c) => {
    const { after } = parse(ThreadsQuery, c.req.query());
    const caller = callerOf(c);
    if (after) await visibleThread(store, after, caller);
    const threads = await store.listThreads(
      caller.all ? null : caller.owner,
      THREAD_PAGE,
      after || undefined,
    );
    return page(c, 'Threads', 'threads', threadsPage(threads.map(threadView)));
  });

  app.get('/console/threads/:id', async (c) => {
    const id = c.req.param('id').slice(0, 64);
    const thread = await visibleThread(store, id, callerOf(c)).catch((err: unknown) => {
      // The API's message names its route; the console names its own list.
      if (err instanceof HttpError && err.status === 404)
        throw new HttpError(404, `No thread ${id}; /console/threads lists yours`);
      throw err;
    });
    // The last hundred turns, as the API gives them by default.
    const view = await threadDetail(store, thread, 100);
    return page(c, thread.title, 'threads', threadPage(view, viewOf(c).can));
  });
}

/** The operator's People page: users, keys and teams as the gateway's admin API lists them to the login. */
function installPeople(app: Hono, viewOf: ViewOf, page: Page): void {
  app.get('/console/people', async (c) => {
    const view = viewOf(c);
    if (!view.can.operate) {
      c.status(403);
      return page(
        c,
        'People',
        'people',
        problem("The People page is the operator's: log in with GATEWAY_ADMIN_TOKEN or an operator key."),
      );
    }
    const [users, keys, teams] = await Promise.all([
      attempt(callRoute(view.gateway, gatewayRoutes.listUsers)),
      attempt(callRoute(view.gateway, gatewayRoutes.listKeys, { query: {} })),
      attempt(callRoute(view.gateway, gatewayRoutes.listTeams)),
    ]);
    if (!users.ok || !keys.ok || !teams.ok) {
      const why = [users, keys, teams].flatMap((r) => (r.ok ? [] : [r.error]))[0];
      return page(c, 'People', 'people', problem(`The gateway did not answer: ${why}`));
    }
    return page(
      c,
      'People',
      'people',
      peoplePage({ users: users.value.users, keys: keys.value.keys, teams: teams.value.teams }),
    );
  });
}

/** A problem the page shows instead of (or above) its content. */
const problem = (message: string) => html`<p class="flash error" role="alert">${message}</p>`;
