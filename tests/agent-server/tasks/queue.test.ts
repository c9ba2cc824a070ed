import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freshDatabase } from '../../helpers/postgres.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// Tasks beyond MAX_CONCURRENT_TASKS wait in a queue kept in the store (`queued`), start in order as slots
// free, survive a restart, can be cancelled before they start; a full queue answers 503 naming both limits.

const stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
});

/** A model whose first reply waits for `release()`; the others answer at once with their order. */
function heldModel() {
  let release: () => void = () => {};
  const held = new Promise<void>((r) => {
    release = r;
  });
  let n = 0;
  const reply = async () => {
    n += 1;
    if (n === 1) await held;
    return answer(`answer ${n}`);
  };
  return { model: new ScriptedModel([reply, reply, reply, reply]), release: () => release() };
}

async function submit(s: Stack, goal: string) {
  const res = await s.post(s.agentApp, '/agent/execute_task', { goal, wait: false });
  expect(res.status).toBe(202);
  return res.body as { task_id: string; status: string };
}

const statusOf = async (s: Stack, id: string) => (await s.get(s.agentApp, `/agent/tasks/${id}`)).body.status;

async function until(s: Stack, id: string, status: string) {
  await expect.poll(() => statusOf(s, id), { timeout: 5000 }).toBe(status);
}

/** A task's stored status, read by a stack that starts no task (no model). */
async function statusAfterStop(dataDir: string, databaseUrl: string | undefined, id: string) {
  const reader = await makeStack({ dataDir, databaseUrl });
  try {
    return await statusOf(reader, id);
  } finally {
    await reader.close(true);
  }
}

describe.each([
  ['SQLite', async () => undefined],
  ['PostgreSQL', () => freshDatabase('queue')],
])('the task queue on %s', (_name, database) => {
  it('queues tasks beyond MAX_CONCURRENT_TASKS and runs them in order as slots free', async () => {
    const { model, release } = heldModel();
    const s = await makeStack({ model, maxConcurrentTasks: 1, databaseUrl: await database() });
    stacks.push(s);
    const first = await submit(s, 'first');
    expect(first.status).toBe('running');
    const second = await submit(s, 'second');
    const third = await submit(s, 'third');
    expect([second.status, third.status]).toEqual(['queued', 'queued']);
    expect(await statusOf(s, second.task_id)).toBe('queued');
    const listed = (await s.get(s.agentApp, '/agent/tasks')).body.tasks.map(
      (t: { status: string }) => t.status,
    );
    expect(listed).toEqual(['queued', 'queued', 'running']);
    release();
    for (const t of [first, second, third]) await until(s, t.task_id, 'completed');
    const answers = await Promise.all(
      [first, second, third].map(
        async (t) => (await s.get(s.agentApp, `/agent/tasks/${t.task_id}`)).body.final_answer,
      ),
    );
    expect(answers).toEqual(['answer 1', 'answer 2', 'answer 3']);
  });

  it('answers 503 naming both limits when the queue is full, and a waiting client gets its answer', async () => {
    const { model, release } = heldModel();
    const s = await makeStack({
      model,
      maxConcurrentTasks: 1,
      maxQueuedTasks: 1,
      databaseUrl: await database(),
    });
    stacks.push(s);
    await submit(s, 'runs');
    const waiting = s.post(s.agentApp, '/agent/execute_task', { goal: 'waits in the queue' });
    await expect.poll(async () => (await s.get(s.agentApp, '/agent/tasks')).body.tasks.length).toBe(2);
    const full = await s.post(s.agentApp, '/agent/execute_task', { goal: 'no room', wait: false });
    expect(full.status).toBe(503);
    expect(full.body.error).toBe(
      '1 tasks are running (MAX_CONCURRENT_TASKS=1) and 1 wait for a slot, the most that may wait (MAX_QUEUED_TASKS=1); retry shortly',
    );
    release();
    expect((await waiting).body).toMatchObject({ status: 'completed', final_answer: 'answer 2' });
  });

  it('cancels a queued task before it starts: nothing runs, its stream ends with the cancellation', async () => {
    const { model, release } = heldModel();
    const s = await makeStack({ model, maxConcurrentTasks: 1, databaseUrl: await database() });
    stacks.push(s);
    const first = await submit(s, 'first');
    const queued = await submit(s, 'never runs');
    const stream = s.agentApp.request(`/agent/tasks/${queued.task_id}/events`);
    const cancelled = await s.post(s.agentApp, `/agent/tasks/${queued.task_id}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', steps: 0 });
    const text = await (await stream).text();
    expect([...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(['task_finished', 'result']);
    release();
    await until(s, first.task_id, 'completed');
    expect(model.requests).toHaveLength(1);
  });

  it('keeps queued tasks across a restart and starts them then, after the running one goes on', async () => {
    const databaseUrl = await database();
    const { model, release } = heldModel();
    const s = await makeStack({ model, maxConcurrentTasks: 1, databaseUrl });
    const held = await submit(s, 'holds the slot');
    const queued = await submit(s, 'waits over a restart');
    const dataDir = s.dataDir;
    // The agent-server stops (the held model call then returns into a stopped task): the queue stays stored.
    const closing = s.close(true);
    release();
    await closing;
    expect(await statusAfterStop(dataDir, databaseUrl, queued.task_id)).toBe('queued');
    // The running task went back to the queue, ahead of the other (it was submitted first).
    expect(await statusAfterStop(dataDir, databaseUrl, held.task_id)).toBe('queued');
    const after = await makeStack({
      model: new ScriptedModel([answer('the held one, resumed'), answer('after the restart')]),
      dataDir,
      databaseUrl,
      maxConcurrentTasks: 1,
    });
    stacks.push(after);
    await until(after, queued.task_id, 'completed');
    expect((await after.get(after.agentApp, `/agent/tasks/${queued.task_id}`)).body.final_answer).toBe(
      'after the restart',
    );
    const resumed = (await after.get(after.agentApp, `/agent/tasks/${held.task_id}`)).body;
    expect(resumed.final_answer).toBe('the held one, resumed');
    // One start, then (no reply was checkpointed) the task goes on from its beginning on the new process.
    const types = (resumed.events as { type: string }[]).map((e) => e.type);
    expect(types.filter((t) => t === 'task_started')).toHaveLength(1);
    expect(types).toContain('task_resumed');
  });
});

describe('two agent-servers on one PostgreSQL database', () => {
  it('share the queue: the idle one claims what the busy one queued, each task runs once, and the busy one answers and streams it', async () => {
    const databaseUrl = await freshDatabase('workers');
    const { model: busyModel, release } = heldModel();
    const busy = await makeStack({ model: busyModel, maxConcurrentTasks: 1, databaseUrl, queuePollMs: 50 });
    stacks.push(busy);
    const first = await submit(busy, 'holds the busy one');
    try {
      const waited = busy.post(busy.agentApp, '/agent/execute_task', { goal: 'waits on the busy one' });
      await expect
        .poll(async () => (await busy.get(busy.agentApp, '/agent/tasks')).body.tasks.length)
        .toBe(2);
      const queued = (await busy.get(busy.agentApp, '/agent/tasks')).body.tasks[0].task_id as string;
      const stream = busy.agentApp.request(`/agent/tasks/${queued}/events`);

      // The second agent-server starts on the same database with a free slot: it claims the queued task.
      const idleModel = new ScriptedModel([answer('ran on the idle one')]);
      const idle = await makeStack({ model: idleModel, maxConcurrentTasks: 2, databaseUrl, queuePollMs: 50 });
      stacks.push(idle);
      expect((await waited).body).toMatchObject({
        status: 'completed',
        final_answer: 'ran on the idle one',
        task_id: queued,
      });
      const events = [...(await (await stream).text()).matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
      expect(events[0]).toBe('task_started');
      expect(events.filter((e) => e === 'task_started')).toHaveLength(1);
      expect(events.slice(-2)).toEqual(['task_finished', 'result']);
      expect(idleModel.requests).toHaveLength(1);
      expect(busyModel.requests).toHaveLength(1);
      const stored = (await idle.get(idle.agentApp, `/agent/tasks/${queued}`)).body.events as {
        seq: number;
      }[];
      expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i + 1));
    } finally {
      release();
    }
    await until(busy, first.task_id, 'completed');
  });

  it('a stopped agent-server claims nothing more: the slot its shutdown frees is not refilled, the task runs on another', async () => {
    const databaseUrl = await freshDatabase('stopped');
    const { model, release } = heldModel();
    const stopped = await makeStack({ model, maxConcurrentTasks: 1, databaseUrl, queuePollMs: 50 });
    stacks.push(stopped);
    try {
      const holding = await submit(stopped, 'holds the only slot');
      await expect.poll(() => model.requests.length).toBe(1);
      // Queued through an agent API that runs nothing; the stopped one has no slot for it yet.
      const api = await makeStack({ model: new ScriptedModel([]), maxConcurrentTasks: 0, databaseUrl });
      stacks.push(api);
      const queued = await submit(api, 'runs elsewhere');
      expect(queued.status).toBe('queued');
      // Its shutdown stops the running task, which frees the slot: nothing may take it up any more.
      const down = stopped.agent.shutdown();
      release();
      await down;
      // The stopped task went back to the queue: the worker takes up both.
      const replies = [answer('ran on the worker'), answer('ran on the worker')];
      const worker = await makeStack({ model: new ScriptedModel(replies), databaseUrl });
      stacks.push(worker);
      for (const t of [queued, holding]) {
        await expect.poll(() => statusOf(worker, t.task_id), { timeout: 10_000 }).toBe('completed');
        const task = (await worker.get(worker.agentApp, `/agent/tasks/${t.task_id}`)).body;
        expect(task.final_answer).toBe('ran on the worker');
      }
      expect(model.requests).toHaveLength(1);
    } finally {
      release();
    }
  });

  it('tell an agent API of tasks a worker claimed too many at once to name: every waiting request gets its answer', async () => {
    const databaseUrl = await freshDatabase('claimed_many');
    const hour = 3_600_000;
    const n = 200;
    // An agent API (no slot: AGENT_ROLE=api) whose queue is never polled: only notifications tell it anything.
    const api = await makeStack({
      model: new ScriptedModel([]),
      maxConcurrentTasks: 0,
      databaseUrl,
      queuePollMs: hour,
    });
    stacks.push(api);
    const waiting = Array.from({ length: n }, (_, i) =>
      api.post(api.agentApp, '/agent/execute_task', { goal: `task ${i}` }),
    );
    await expect.poll(async () => (await api.taskStore.countTasks()).queued, { timeout: 30_000 }).toBe(n);
    // A worker with a slot for each claims them all in one statement: too many ids for one notification.
    const replies = Array.from({ length: n }, () => answer('done on the worker'));
    const worker = await makeStack({
      model: new ScriptedModel(replies),
      maxConcurrentTasks: n + 50,
      databaseUrl,
      queuePollMs: hour,
    });
    stacks.push(worker);
    const answers = await Promise.all(waiting);
    expect(answers.map((r) => r.body.status)).toEqual(Array(n).fill('completed'));
    expect(new Set(answers.map((r) => r.body.final_answer))).toEqual(new Set(['done on the worker']));
  }, 90_000);

  it('wake each other through notifications: with polling an hour apart, a task queued on one starts at once on the other, and a stream on the first follows it live', async () => {
    const databaseUrl = await freshDatabase('notify');
    const hour = 3_600_000;
    const { model: busyModel, release } = heldModel();
    const busy = await makeStack({
      model: busyModel,
      maxConcurrentTasks: 1,
      databaseUrl,
      queuePollMs: hour,
      streamPollMs: hour,
    });
    stacks.push(busy);
    const idleModel = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] })),
      answer('woken up'),
    ]);
    const idle = await makeStack({ model: idleModel, maxConcurrentTasks: 1, databaseUrl, queuePollMs: hour });
    stacks.push(idle);
    const first = await submit(busy, 'holds the busy one');
    try {
      const queued = await submit(busy, 'runs on the idle one');
      expect(queued.status).toBe('queued');
      // The busy one's stream of the queued task: every event comes live, though it runs on the other one.
      const text = await (await busy.agentApp.request(`/agent/tasks/${queued.task_id}/events`)).text();
      const events = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
      expect(events[0]).toBe('task_started');
      expect(events.filter((e) => e === 'model_call')).toHaveLength(2);
      expect(events).toContain('tool_call_started');
      expect(events.slice(-2)).toEqual(['task_finished', 'result']);
      expect(text).toContain('woken up');
      expect(idleModel.requests).toHaveLength(2);
    } finally {
      release();
    }
    await until(busy, first.task_id, 'completed');
  });

  it('follows a task running on the other in an event stream, also after a reconnect with Last-Event-ID', async () => {
    const databaseUrl = await freshDatabase('follow');
    const { model, release } = heldModel();
    const runner = await makeStack({ model, databaseUrl, queuePollMs: 50 });
    stacks.push(runner);
    const other = await makeStack({ databaseUrl, queuePollMs: 50 });
    stacks.push(other);
    const task = await submit(runner, 'runs on the first');
    try {
      // The first stream, on the other agent-server, sees what is stored so far and stays open.
      const first = await other.agentApp.request(`/agent/tasks/${task.task_id}/events`);
      const reader = (first.body as ReadableStream<Uint8Array>).getReader();
      const head = new TextDecoder().decode((await reader.read()).value);
      expect(head).toMatch(/^event: task_started\ndata: .*\nid: 1\n/);
      await reader.cancel();
      release();
      // Reconnected after event 1: the rest, then the result, as the task ends on the first agent-server.
      const again = await other.agentApp.request(`/agent/tasks/${task.task_id}/events`, {
        headers: { 'last-event-id': '1' },
      });
      const text = await again.text();
      const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      expect(ids[0]).toBe(2);
      expect(ids).toEqual(ids.map((_, i) => i + 2));
      const names = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
      expect(names.slice(-2)).toEqual(['task_finished', 'result']);
      const result = JSON.parse(text.trim().split('\n').at(-1)?.slice('data: '.length) ?? '{}');
      expect(result).toMatchObject({ status: 'completed', final_answer: 'answer 1' });
    } finally {
      release();
    }
  });

  it('ends a paused task that runs out of time once, on the one that claims it; the other stays up', async () => {
    const databaseUrl = await freshDatabase('paused_timeout');
    const model = () =>
      new ScriptedModel([
        calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
        calls(call('write_file', { path: 'never.txt', content: 'never written' })),
      ]);
    const policy = 'rules:\n  - { tool: write_file, decision: ask }\n';
    const first = await makeStack({ model: model(), databaseUrl, policy, queuePollMs: 50 });
    stacks.push(first);
    const second = await makeStack({
      model: model(),
      databaseUrl,
      gatewayApp: first.gatewayApp,
      queuePollMs: 50,
    });
    stacks.push(second);
    const res = await first.post(first.agentApp, '/agent/execute_task', {
      goal: 'waits past its time',
      wait: false,
      max_duration_s: 2,
    });
    const taskId = res.body.task_id as string;
    await until(first, taskId, 'awaiting_approval');
    // Both wait for the decision (the second took the paused task up from the store); neither gets one.
    await expect.poll(() => statusOf(second, taskId), { timeout: 10_000 }).toBe('timed_out');
    // The first's wait for the decision ends too, without a second end recorded.
    await expect
      .poll(() => first.agent.holds(taskId) || second.agent.holds(taskId), { timeout: 10_000 })
      .toBe(false);
    const task = (await second.get(second.agentApp, `/agent/tasks/${taskId}`)).body;
    expect(task.status).toBe('timed_out');
    expect(task.events.filter((e: { type: string }) => e.type === 'task_finished')).toHaveLength(1);
    const seqs = task.events.map((e: { seq: number }) => e.seq);
    expect(seqs).toEqual(seqs.map((_: number, i: number) => i + 1));
    for (const s of [first, second]) expect((await s.agentApp.request('/health')).status).toBe(200);
  });

  it('resumes a paused task on exactly one of them when the approval is decided on the other', async () => {
    const databaseUrl = await freshDatabase('approve');
    const firstModel = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
      calls(call('write_file', { path: 'once.txt', content: 'written once' })),
      answer('finished on the first'),
    ]);
    const first = await makeStack({
      model: firstModel,
      databaseUrl,
      policy: 'rules:\n  - { tool: write_file, decision: ask }\n',
      queuePollMs: 50,
    });
    stacks.push(first);
    const secondModel = new ScriptedModel([answer('finished on the second')]);
    const second = await makeStack({
      model: secondModel,
      databaseUrl,
      gatewayApp: first.gatewayApp,
      queuePollMs: 50,
    });
    stacks.push(second);
    const task = await submit(first, 'write once');
    await until(first, task.task_id, 'awaiting_approval');
    const pending = (await second.get(second.agentApp, '/agent/approvals')).body.approvals;
    expect(pending.map((p: { task_id: string }) => p.task_id)).toEqual([task.task_id]);
    const decided = await second.post(
      second.agentApp,
      `/agent/tasks/${task.task_id}/approvals/${pending[0].call_id}`,
      { approve: true },
    );
    expect(decided.status).toBe(200);
    await until(second, task.task_id, 'completed');
    const done = (await second.get(second.agentApp, `/agent/tasks/${task.task_id}`)).body;
    expect(['finished on the first', 'finished on the second']).toContain(done.final_answer);
    // One model answered after the decision (three model calls in all), and the write ran once.
    await expect
      .poll(() => first.agent.holds(task.task_id) || second.agent.holds(task.task_id), { timeout: 10_000 })
      .toBe(false);
    expect(firstModel.requests.length + secondModel.requests.length).toBe(3);
    const writes = done.events.filter(
      (e: { type: string; data: { name?: string } }) =>
        e.type === 'tool_call' && e.data.name === 'write_file',
    );
    expect(writes).toHaveLength(1);
    expect(done.events.filter((e: { type: string }) => e.type === 'approval_decided')).toHaveLength(1);
    expect(await readFile(path.join(first.root, 'once.txt'), 'utf8')).toBe('written once');
    const seqs = done.events.map((e: { seq: number }) => e.seq);
    expect(seqs).toEqual(seqs.map((_: number, i: number) => i + 1));
  });
});
