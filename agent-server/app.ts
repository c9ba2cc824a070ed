import { type Context, Hono } from 'hono';
import { databaseHealth } from '../lib/db/reachability.ts';
import { HttpError, installBase, route } from '../lib/http/http.ts';
import { serveOpenApi } from '../lib/http/openapi.ts';
import {
  callerOf,
  chargeCaller,
  healthDetail,
  refuseIfSpent,
  type Security,
  visibleUsers,
} from '../lib/http/security.ts';
import type { Logger } from '../lib/telemetry/log.ts';
import type { Metrics } from '../lib/telemetry/metrics.ts';
import type { ModelHealth } from './clients/model.ts';
import { type ConsoleDeps, installConsole } from './console/routes.ts';
import type { Task } from './contract.ts';
import * as contract from './contract.ts';
import { agentRoutes as routes } from './contract.ts';
import { ModelNotConfiguredError } from './errors.ts';
import { resumeAfter, streamTask } from './http/task-stream.ts';
import { installThreadRoutes } from './http/threads.ts';
import type { TaskStore } from './store/store.ts';
import type { Agent } from './tasks/agent.ts';
import { approvalsInSight, type Caller, ownerOfTask } from './tasks/threads.ts';

/** What the agent-server's app needs; tests pass their own. */
export interface AgentAppDeps {
  agent: Agent;
  store: TaskStore;
  log: Logger;
  security: Security;
  /** The service's metrics (its own series included); default: a fresh registry with the HTTP series. */
  metrics?: Metrics;
  /** How often an idle event stream gets a keep-alive comment (default 15 s). */
  heartbeatMs?: number;
  /** The model endpoint's last known state, for /health (absent: none configured, or a scripted model). */
  modelHealth?: () => ModelHealth;
  /** How often a stream of a task running in another process reads the store besides its notifications. */
  streamPollMs?: number;
  /** A worker (AGENT_ROLE=worker) serves no agent API: only /health and /metrics. */
  worker?: boolean;
  /** The web console at /console: its logins (the same as `security.console`'s) and the gateway it shows. */
  console?: Pick<ConsoleDeps, 'logins' | 'gateway' | 'signIn' | 'model' | 'database'>;
}

/** True when the client asked not to wait (RFC 7240 `Prefer: respond-async`). */
function prefersAsync(header: string | undefined): boolean {
  return (header ?? '').split(',').some(
    (p) =>
      p
        .trim()
        .toLowerCase()
        .split(/[;=\s]/)[0] === 'respond-async',
  );
}

/** The agent-server's HTTP API; only main.ts listens. */
export function createAgentApp(deps: AgentAppDeps): Hono {
  const { agent, store } = deps;
  const app = new Hono();
  installBase(app, deps.log, deps.security, { metrics: deps.metrics });
  if (deps.worker) {
    app.use('/agent/*', () => {
      throw new HttpError(
        404,
        'This agent-server is a worker (AGENT_ROLE=worker): it runs queued tasks and serves no agent API; send ' +
          'requests to an agent-server with AGENT_ROLE=api or all',
      );
    });
  }
  installTaskRoutes(app, deps);
  installThreadRoutes(app, store, agent);
  installApprovalRoutes(app, agent, deps.store);
  installHealth(app, deps);
  if (deps.console && !deps.worker) {
    installConsole(app, { ...deps.console, agent, store, modelHealth: deps.modelHealth });
  }

  serveOpenApi(app, {
    service: 'agent-server',
    routes,
    schemas: contract,
    about:
      'The agent-server: runs tasks (an LLM tool-calling loop whose model activates and dismisses its own toolsets), streams their events, and relays approvals.',
  });
  return app;
}

/** Running a task (waiting for it, streaming it, or not), its events, cancelling it, reading and listing tasks. */
function installTaskRoutes(app: Hono, deps: AgentAppDeps): void {
  const { agent, store } = deps;
  const streams = { agent, store, heartbeatMs: deps.heartbeatMs ?? 15_000, pollMs: deps.streamPollMs };
  // A task of another credential's thread is not there, as its thread is not (404).
  const taskOrThrow = async (c: Context, id: string) => {
    const task = await store.getTask(id);
    if (!task || !(await ownsTask(store, callerOf(c), task)))
      throw new HttpError(404, `No task ${id}; GET /agent/tasks lists recent tasks`);
    return task;
  };

  route(app, routes.executeTask, async (c, { body }) => {
    if (!agent.modelConfigured) throw new HttpError(503, new ModelNotConfiguredError().message);
    // A user's limits: its model tokens of the day left, and one more task this hour (429 past either).
    await refuseIfSpent(c, 'model_tokens_per_day');
    const giveBack = await chargeCaller(c, 'tasks_per_hour');
    // The task runs apart from this request: a client that goes away does not stop it. One refused (a thread
    // not the caller's, a queue full) was not a task: its count is given back.
    const started = await agent.start(body, callerOf(c)).catch(async (err: unknown) => {
      await giveBack();
      throw err;
    });
    if (body.wait === false || prefersAsync(c.req.header('prefer'))) {
      c.header('preference-applied', 'respond-async');
      c.header('location', `/agent/tasks/${started.task_id}`);
      const { task_id, session_id, thread_id, status } = started;
      return c.json({ task_id, session_id, thread_id, status }, 202);
    }
    if ((c.req.header('accept') ?? '').includes('text/event-stream')) {
      return streamTask(c, streams, started.task_id, 0);
    }
    return c.json(await started.done);
  });

  route(app, routes.taskEvents, async (c, { params, query }) => {
    await taskOrThrow(c, params.id);
    return streamTask(c, streams, params.id, resumeAfter(c, query.after));
  });

  route(app, routes.cancelTask, async (c, { params }) => {
    const task = await taskOrThrow(c, params.id);
    if (!(await agent.cancel(params.id))) {
      throw new HttpError(
        409,
        `Task ${params.id} is not running (status: ${task.status}); only a running task can be cancelled`,
      );
    }
    return c.json(await taskOrThrow(c, params.id));
  });

  route(app, routes.getTask, async (c, { params }) => {
    const task = await taskOrThrow(c, params.id);
    const webhooks = await store.webhookDeliveries(params.id);
    return c.json({
      ...task,
      events: await store.events(params.id),
      ...(webhooks.length ? { webhooks } : {}),
    });
  });

  route(app, routes.listTasks, async (c, { query }) => {
    const caller = callerOf(c);
    const owner = caller.all ? {} : { owner: caller.owner };
    return c.json({ tasks: await store.recentTasks(query.limit, owner) });
  });
}

/** Whether `caller` may see the task: one of no thread (recorded before threads), or of a thread of theirs. */
async function ownsTask(store: TaskStore, caller: Caller, task: Task): Promise<boolean> {
  if (caller.all) return true;
  // Recorded before threads: its owner is not known, and a person (a user's key) sees only what is theirs.
  if (task.thread_id === null) return !caller.owner.startsWith('user:');
  return (await store.getThread(task.thread_id))?.owner === caller.owner;
}

/** The approvals the tasks wait for, and a human's decision, relayed to the gateway. */
function installApprovalRoutes(app: Hono, agent: Agent, store: TaskStore): void {
  route(app, routes.listApprovals, async (c) =>
    c.json({
      approvals: await approvalsInSight(store, await agent.pendingApprovals(), await visibleUsers(c)),
    }),
  );

  // The human's own credential goes to the gateway: their bearer token, or the token their console login holds.
  route(app, routes.decideApproval, async (c, { params, body }) => {
    const principal = c.get('principal');
    const key = principal && 'user' in principal ? principal.user : undefined;
    if (key && key.role !== 'approver' && key.role !== 'operator') {
      throw new HttpError(
        403,
        `A ${key.role} key cannot decide approvals: an approver of the team or an operator can`,
        {
          required_roles: ['approver', 'operator'],
        },
      );
    }
    // Another team's task waits for nothing this caller can see: the same 404 as a task that waits for nothing.
    const visible = await visibleUsers(c);
    if (visible && !visible.includes((await ownerOfTask(store, params.id)) ?? '')) {
      throw new HttpError(
        404,
        `Task ${params.id} is not waiting for an approval of call ${params.call_id}; GET /agent/approvals lists what tasks wait for`,
      );
    }
    const login = c.get('consoleLogin');
    const authorization = c.req.header('authorization') ?? (login ? `Bearer ${login.token}` : undefined);
    // Named as the gateway names its actors, so a decision reads the same whichever service recorded it.
    const role = login?.consoleRole ?? c.get('principal')?.role ?? 'local';
    const by = key
      ? `user ${key.user.name} (key ${key.keyId})`
      : role === 'user'
        ? 'user (AGENT_API_TOKEN)'
        : role;
    return c.json(await agent.decideApproval(params.id, params.call_id, body, authorization, by));
  });
}

/**
 * GET /health. Without a token, only whether it is up (like every service): the rest is for the service's
 * callers. With one, the model endpoint's last known state too; one known to be bad (unreachable, or answering
 * errors such as a refused key) makes the status `degraded` — still 200: the service is up, tasks fail.
 * PostgreSQL unreachable makes it `degraded` too (to anyone: what needs the database answers 503 meanwhile).
 */
function installHealth(app: Hono, deps: AgentAppDeps): void {
  const { agent } = deps;
  route(app, routes.health, (c) => {
    const database = databaseHealth();
    const dbDown = database.state !== 'ok';
    if (!healthDetail(c)) return c.json({ status: dbDown ? ('degraded' as const) : ('ok' as const) });
    const model = agent.modelConfigured ? deps.modelHealth?.() : undefined;
    const bad = model?.state === 'unreachable' || model?.state === 'error' || dbDown;
    return c.json({
      status: bad ? ('degraded' as const) : ('ok' as const),
      model_configured: agent.modelConfigured,
      ...(model ? { model } : {}),
      ...(dbDown ? { database } : {}),
    });
  });
}
