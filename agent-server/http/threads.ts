import type { Hono } from 'hono';
import { HttpError, route } from '../../lib/http/http.ts';
import { callerOf } from '../../lib/http/security.ts';
import { agentRoutes as routes } from '../contract.ts';
import type { TaskStore } from '../store/interface.ts';
import type { Agent } from '../tasks/agent.ts';
import { checkSession, threadDetail, threadView, titleOf, visibleThread } from '../tasks/threads.ts';

// Threads as the API serves them: made, listed (the caller's own; the operator's all), read with their turns,
// deleted with their tasks. Another credential's thread answers as a missing one does (404).

export function installThreadRoutes(app: Hono, store: TaskStore, agent: Agent): void {
  route(app, routes.createThread, async (c, { body }) => {
    const caller = callerOf(c);
    if (body.webhook) await agent.checkWebhook(body.webhook.url);
    if (body.session_id !== undefined) await checkSession(store, body.session_id, caller);
    const thread = {
      thread_id: `thr_${crypto.randomUUID()}`,
      session_id: body.session_id ?? `ses_${crypto.randomUUID()}`,
      owner: caller.owner,
      title: titleOf(body.title ?? 'New thread'),
      webhook: body.webhook ?? null,
      created_at: new Date().toISOString(),
    };
    await store.createThread(thread);
    c.header('location', `/agent/threads/${thread.thread_id}`);
    return c.json(threadView({ ...thread, updated_at: thread.created_at }), 201);
  });

  route(app, routes.listThreads, async (c, { query }) => {
    const caller = callerOf(c);
    if (query.after !== undefined) await visibleThread(store, query.after, caller);
    const rows = await store.listThreads(caller.all ? null : caller.owner, query.limit + 1, query.after);
    const page = rows.slice(0, query.limit);
    return c.json({
      threads: page.map(threadView),
      next: rows.length > query.limit ? (page.at(-1)?.thread_id ?? null) : null,
    });
  });

  route(app, routes.getThread, async (c, { params, query }) => {
    const thread = await visibleThread(store, params.id, callerOf(c));
    return c.json(await threadDetail(store, thread, query.turns));
  });

  route(app, routes.deleteThread, async (c, { params }) => {
    const thread = await visibleThread(store, params.id, callerOf(c));
    const gone = await store.deleteThread(thread.thread_id);
    if (!gone) throw new HttpError(404, `No thread ${params.id}; GET /agent/threads lists yours`);
    if ('busy' in gone) {
      throw new HttpError(
        409,
        `Thread ${params.id} has a task that has not ended (${gone.busy}); cancel it first ` +
          `(POST /agent/tasks/${gone.busy}/cancel), then delete the thread`,
        { task_id: gone.busy },
      );
    }
    return c.json({ thread_id: params.id, deleted_tasks: gone.deleted });
  });
}
