import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentApp } from '../../agent-server/app.ts';
import { createGatewayClient } from '../../agent-server/clients/gateway.ts';
import type { CompleteOptions, Model, ModelReply, ModelRequest } from '../../agent-server/clients/model.ts';
import type { TaskEvent } from '../../agent-server/contract.ts';
import { createTaskStore } from '../../agent-server/store/store.ts';
import { createAgent } from '../../agent-server/tasks/agent.ts';
import { openDatabase } from '../../lib/db/sqlite.ts';
import { answer, call, calls } from '../helpers/scripted-model.ts';
import { allSse, readSse } from '../helpers/sse.ts';
import {
  fetchOf,
  log,
  makeStack,
  openSecurity,
  retain,
  SPLIT_TOOLSETS,
  type Stack,
} from '../helpers/stack.ts';

// Live task events over HTTP: the stream of a scripted task, replay, following, resuming, async submit,
// cancel (during a model call and during a tool call, checked on disk) and a client that goes away.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

type Step = (request: ModelRequest, options: CompleteOptions) => ModelReply | Promise<ModelReply>;

/** A model playing `steps`, recording what it was asked (and with which options). */
function model(steps: Step[]) {
  const requests: ModelRequest[] = [];
  const m: Model & { requests: ModelRequest[] } = {
    requests,
    async complete(request, options = {}) {
      requests.push(structuredClone(request));
      const step = steps[requests.length - 1];
      if (!step) throw new Error(`no step ${requests.length}`);
      return step(request, options);
    },
  };
  return m;
}

/** A model call that never answers on its own: it ends only when the task's signal aborts it. */
const hangs: Step = (_request, options) =>
  new Promise((_resolve, reject) => {
    options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
  });

/** A promise to wait on and the function that settles it. */
function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { opened, open };
}

/** The agent-server over `s`'s gateway, with a short heartbeat; `wrapGateway` can slow calls to the gateway. */
function agentOver(
  s: Stack,
  m: Model,
  opts: {
    heartbeatMs?: number;
    wrapGateway?: (f: ReturnType<typeof fetchOf>) => ReturnType<typeof fetchOf>;
  } = {},
) {
  const store = createTaskStore(openDatabase(path.join(s.dataDir, `agent-${Math.random()}.db`)));
  retain(store);
  const plain = fetchOf(s.gatewayApp);
  const agent = createAgent({
    store,
    gateway: createGatewayClient({
      baseUrl: 'http://gateway',
      fetch: opts.wrapGateway ? opts.wrapGateway(plain) : plain,
    }),
    model: m,
    modelName: 'test-model',
    defaultMaxSteps: 20,
    log,
    prime: false,
  });
  const app = createAgentApp({ agent, store, log, security: openSecurity, heartbeatMs: opts.heartbeatMs });
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    app.request('/agent/execute_task', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const events = (id: string, headers: Record<string, string> = {}, query = '') =>
    app.request(`/agent/tasks/${id}/events${query}`, { headers });
  const cancel = (id: string) => app.request(`/agent/tasks/${id}/cancel`, { method: 'POST' });
  const task = async (id: string) => (await (await app.request(`/agent/tasks/${id}`)).json()) as any;
  return { app, agent, store, post, events, cancel, task };
}

const parse = (data: string) => JSON.parse(data) as TaskEvent;

describe('task events', () => {
  it('streams a scripted task’s events in order with their payloads', async () => {
    const m = model([
      () => calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] }, 'c1')),
      () => calls(call('write_file', { path: 'a.txt', content: 'hello' }, 'c2')),
      () => answer('wrote a.txt'),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = agentOver(stack, m);
    const res = await a.post({ goal: 'write a.txt' }, { accept: 'text/event-stream' });
    const messages = await allSse(res);
    expect(messages.map((x) => x.event)).toEqual([
      'task_started',
      'model_request',
      'model_call',
      'tool_call_started',
      'toolset_change',
      'model_request',
      'model_call',
      'tool_call_started',
      'tool_call',
      'model_request',
      'model_call',
      'task_finished',
      'result',
    ]);
    const ev = messages.slice(0, -1).map((x) => parse(x.data));
    expect(ev.map((e) => e.seq)).toEqual(ev.map((_, i) => i + 1));
    expect(messages.slice(0, -1).map((x) => x.id)).toEqual(ev.map((e) => String(e.seq)));
    const [started, req1, call1, , change, req2, , toolStart, tool, , , finished] = ev;
    expect(started.data).toMatchObject({ goal: 'write a.txt', max_steps: 20, max_duration_s: 1800 });
    // Before each call: the tools offered and what their definitions and the messages cost in tokens.
    expect(req1.data).toMatchObject({
      step: 1,
      tools: ['manage_toolsets'],
      messages: 2,
      tokenizer: 'o200k_base',
    });
    expect(req1.data.tool_tokens).toBeGreaterThan(50);
    expect(req1.data.message_tokens).toBeGreaterThan(20);
    expect(req2.data.tools).toEqual(['manage_toolsets', 'write_file', 'edit_file', 'delete_file']);
    expect(req2.data.tool_tokens as number).toBeGreaterThan(req1.data.tool_tokens as number);
    expect(req2.data.message_tokens as number).toBeGreaterThan(req1.data.message_tokens as number);
    expect(call1.data).toMatchObject({
      step: 1,
      attempts: 1,
      tool_calls: [{ id: 'c1', name: 'manage_toolsets' }],
      usage: { total_tokens: 15 },
    });
    expect(typeof call1.data.latency_ms).toBe('number');
    expect(change.data).toMatchObject({ action: 'ACTIVATE', toolset_ids: ['fs_write'], tool_call_id: 'c1' });
    expect(toolStart.data).toEqual({ step: 2, tool_call_id: 'c2', name: 'write_file' });
    expect(tool.data).toMatchObject({ name: 'write_file', ok: true, toolset: 'fs_write' });
    expect(tool.data.result_bytes).toBe(Buffer.byteLength(String(tool.data.output)));
    expect(tool.duration_ms).toBeGreaterThanOrEqual(0);
    expect(finished.data).toMatchObject({ status: 'completed', steps: 3, toolsets_used: ['fs_write'] });
    const result = JSON.parse(messages.at(-1)?.data ?? '{}');
    expect(result).toMatchObject({ status: 'completed', final_answer: 'wrote a.txt', steps: 3 });
    // Per-task totals: three requests, their tool and message tokens summed.
    const sent = [req1, req2, ev[9]].map((e) => e.data.tool_tokens as number);
    expect(result.tokens).toMatchObject({ requests: 3, tool_definition_tokens: sent[0] + sent[1] + sent[2] });
  });

  it('replays a finished task, and resumes after Last-Event-ID without repeating an event', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = agentOver(
      stack,
      model([
        () => calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] })),
        () => answer('done'),
      ]),
    );
    const done = await (await a.post({ goal: 'list' })).json();
    const replay = await allSse(await a.events(done.task_id));
    const stored = (await a.task(done.task_id)).events as TaskEvent[];
    expect(replay.slice(0, -1).map((x) => parse(x.data))).toEqual(stored);
    expect(replay.at(-1)?.event).toBe('result');
    expect(JSON.parse(replay.at(-1)?.data ?? '{}')).toMatchObject({
      status: 'completed',
      final_answer: 'done',
    });
    const resumed = await allSse(await a.events(done.task_id, { 'last-event-id': '4' }));
    expect(resumed.slice(0, -1).map((x) => Number(x.id))).toEqual(stored.slice(4).map((e) => e.seq));
    const viaQuery = await allSse(await a.events(done.task_id, {}, '?after=6'));
    expect(viaQuery.slice(0, -1).map((x) => Number(x.id))).toEqual(stored.slice(6).map((e) => e.seq));
    const missing = await a.events('task_nope');
    expect(missing.status).toBe(404);
  });

  it('follows a running task live, with keep-alive comments while it is idle, and reconnects with Last-Event-ID', async () => {
    const release = gate();
    const m = model([
      () => calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] })),
      async () => {
        await release.opened;
        return answer('finally');
      },
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = agentOver(stack, m, { heartbeatMs: 10 });
    const accepted = await a.post({ goal: 'wait for me' }, { prefer: 'respond-async' });
    expect(accepted.status).toBe(202);
    expect(accepted.headers.get('preference-applied')).toBe('respond-async');
    const { task_id: id } = await accepted.json();
    // The second model call is held: follow until its request, then see the stream kept alive.
    const first = readSse(await a.events(id));
    const second = await first.until('model_request');
    expect(parse(second?.data ?? '').data).toMatchObject({ step: 1 });
    const held = await first.until('model_request');
    expect(parse(held?.data ?? '').data).toMatchObject({ step: 2 });
    expect(await first.untilComment()).toBe('keep-alive');
    const lastSeen = held?.id ?? '';
    await first.cancel();
    // The client went away; the task did not notice. Reconnect where we left off, then let it finish.
    expect((await a.task(id)).status).toBe('running');
    const again = readSse(await a.events(id, { 'last-event-id': lastSeen }));
    release.open();
    await again.until('result');
    const ids = again.seen.filter((x) => x.id).map((x) => Number(x.id));
    expect(ids[0]).toBe(Number(lastSeen) + 1);
    expect(again.seen.map((x) => x.event)).toEqual(['model_call', 'task_finished', 'result']);
    expect(JSON.parse(again.seen.at(-1)?.data ?? '{}')).toMatchObject({ final_answer: 'finally' });
  });

  it('accepts {"wait": false} with 202 and keeps a task running when a blocking client disconnects', async () => {
    const release = gate();
    const m = model([
      async () => {
        await release.opened;
        return answer('alone');
      },
      async () => answer('second'),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = agentOver(stack, m);
    const accepted = await a.post({ goal: 'async', wait: false });
    expect(accepted.status).toBe(202);
    const body = await accepted.json();
    expect(body).toEqual({
      task_id: expect.stringMatching(/^task_/),
      session_id: expect.any(String),
      thread_id: expect.stringMatching(/^thr_/),
      status: 'running',
    });
    expect(accepted.headers.get('location')).toBe(`/agent/tasks/${body.task_id}`);
    // A blocking request whose client aborts: the task runs on.
    const abort = new AbortController();
    const blocking = a.app.request('/agent/execute_task', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ goal: 'blocking' }),
      signal: abort.signal,
    });
    abort.abort();
    await Promise.resolve(blocking).catch(() => undefined);
    release.open();
    const followed = await allSse(await a.events(body.task_id));
    expect(JSON.parse(followed.at(-1)?.data ?? '{}')).toMatchObject({
      status: 'completed',
      final_answer: 'alone',
    });
    const tasks = (await (await a.app.request('/agent/tasks')).json()) as {
      tasks: { goal: string; status: string }[];
    };
    const other = tasks.tasks.find((t) => t.goal === 'blocking');
    for (let i = 0; i < 200 && other && (await a.task((other as any).task_id)).status === 'running'; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((await a.task((other as any).task_id)).status).toBe('completed');
  });
});

describe('cancel and time limits', () => {
  it('cancels during a slow model call: the call is aborted and the task ends cancelled, on record', async () => {
    let aborted = false;
    const m = model([
      (request, options) => {
        options.signal?.addEventListener('abort', () => {
          aborted = true;
        });
        return hangs(request, options);
      },
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = agentOver(stack, m);
    const { task_id: id } = await (await a.post({ goal: 'think forever', wait: false })).json();
    const stream = readSse(await a.events(id));
    await stream.until('model_request');
    const res = await a.cancel(id);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      status: 'cancelled',
      error: 'The task was cancelled by a client',
    });
    expect(aborted).toBe(true);
    await stream.until('result');
    expect(stream.seen.map((x) => x.event).slice(-2)).toEqual(['task_finished', 'result']);
    expect(parse(stream.seen.at(-2)?.data ?? '').data).toMatchObject({ status: 'cancelled' });
    expect(m.requests).toHaveLength(1);
    const again = await a.cancel(id);
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: string }).error).toMatch(/is not running \(status: cancelled\)/);
    expect((await a.cancel('task_nope')).status).toBe(404);
  });

  it('cancels during a slow tool call: the call is abandoned and no further tool runs (checked on disk)', async () => {
    const held = gate();
    const reached = gate();
    const m = model([
      () => calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
      () =>
        calls(
          call('write_file', { path: 'slow.txt', content: 'slow' }, 'w1'),
          call('write_file', { path: 'after.txt', content: 'never' }, 'w2'),
        ),
      () => answer('not reached'),
    ]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    // The gateway's answer to the first write is held until the agent gives up on it.
    const a = agentOver(stack, m, {
      wrapGateway: (f) => async (url, init) => {
        if (url.includes('/mcp/tools/write_file/call') && String(init?.body).includes('slow.txt')) {
          reached.open();
          await Promise.race([
            held.opened,
            new Promise((_, reject) =>
              init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }),
            ),
          ]);
        }
        return f(url, init);
      },
    });
    const { task_id: id } = await (await a.post({ goal: 'write two files', wait: false })).json();
    await reached.opened;
    const res = await a.cancel(id);
    expect(await res.json()).toMatchObject({ status: 'cancelled' });
    held.open();
    const task = await a.task(id);
    expect(task.events.map((e: TaskEvent) => e.type).slice(-2)).toEqual([
      'tool_call_started',
      'task_finished',
    ]);
    expect(task.events.filter((e: TaskEvent) => e.type === 'tool_call_started')).toHaveLength(2);
    expect(existsSync(path.join(stack.root, 'slow.txt'))).toBe(false);
    expect(existsSync(path.join(stack.root, 'after.txt'))).toBe(false);
    expect(m.requests).toHaveLength(2);
  });

  it('ends a task that outlives max_duration_s as timed_out', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const a = agentOver(stack, model([hangs]));
    const res = await (await a.post({ goal: 'slow', max_duration_s: 1 })).json();
    expect(res).toMatchObject({
      status: 'timed_out',
      error: 'The task reached its time limit (max_duration_s = 1)',
    });
    expect((await a.task(res.task_id)).status).toBe('timed_out');
    const bad = await a.post({ goal: 'x', max_duration_s: 0 });
    expect(bad.status).toBe(400);
  });
});
