import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { HttpError, installBase, route, serveOpenApi } from '../lib/http.ts';
import type { Logger } from '../lib/log.ts';
import type { Security } from '../lib/security.ts';
import type { Agent } from './agent.ts';
import { agentRoutes as routes } from './contract.ts';
import { ModelNotConfiguredError } from './errors.ts';
import type { TaskStore } from './store.ts';

/** What the agent-server's app needs; tests pass their own. */
export interface AgentAppDeps {
  agent: Agent;
  store: TaskStore;
  log: Logger;
  security: Security;
}

/** The agent-server's HTTP API; only main.ts listens. */
export function createAgentApp(deps: AgentAppDeps): Hono {
  const { agent, store } = deps;
  const app = new Hono();
  installBase(app, deps.log, deps.security);

  route(app, routes.executeTask, async (c, { body }) => {
    if (!agent.modelConfigured) throw new HttpError(503, new ModelNotConfiguredError().message);
    if (!(c.req.header('accept') ?? '').includes('text/event-stream'))
      return c.json(await agent.execute(body));
    return streamSSE(c, async (stream) => {
      // Events are written in order: each write waits for the previous one.
      let chain = Promise.resolve();
      const result = await agent.execute(body, (event) => {
        chain = chain.then(() =>
          stream.writeSSE({ event: event.type, id: String(event.seq), data: JSON.stringify(event) }),
        );
      });
      await chain;
      await stream.writeSSE({ event: 'result', data: JSON.stringify(result) });
    });
  });

  route(app, routes.getTask, (c, { params }) => {
    const task = store.getTask(params.id);
    if (!task) throw new HttpError(404, `No task ${params.id}; GET /agent/tasks lists recent tasks`);
    return c.json({ ...task, events: store.events(params.id) });
  });

  route(app, routes.listTasks, (c, { query }) => c.json({ tasks: store.recentTasks(query.limit) }));

  route(app, routes.health, (c) =>
    c.json({ status: 'ok' as const, model_configured: agent.modelConfigured }),
  );

  serveOpenApi(app, 'toolshift agent-server', Object.values(routes));
  return app;
}
