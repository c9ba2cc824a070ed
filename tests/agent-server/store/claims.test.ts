import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { QueueChange, StoreOptions, TaskStore } from '../../../agent-server/store/interface.ts';
import { createPostgresTaskStore, createTaskStore } from '../../../agent-server/store/store.ts';
import { openPostgres, type Pool } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// Claims in one statement (store.claimNext): the oldest queued tasks a worker has slots for, handed back with
// what each goes on from, each to one worker; on PostgreSQL the other processes hear which tasks went.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** Every statement a pool runs, counted on the connections it lends (pool.query runs on one too). */
function counted(pool: Pool) {
  const counter = { statements: 0 };
  pool.on('acquire', (client) => {
    const marked = client as typeof client & { counted?: boolean };
    if (marked.counted) return;
    marked.counted = true;
    const clientQuery = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      counter.statements++;
      return clientQuery(...args);
    };
  });
  return counter;
}

type Open = (opts?: StoreOptions) => Promise<TaskStore>;

const backends: { name: string; place: () => Promise<Open> }[] = [
  {
    name: 'SQLite',
    async place() {
      const dir = await mkdtemp(path.join(tmpdir(), 'claims-'));
      dirs.push(dir);
      return async (opts) => createTaskStore(openDatabase(path.join(dir, 'agent.db')), opts);
    },
  },
  {
    name: 'PostgreSQL',
    async place() {
      const url = await freshDatabase('claims');
      return (opts) => createPostgresTaskStore(openPostgres(url, 'test', { max: 4 }), opts);
    },
  },
];

describe.each(backends)('claims on $name', ({ place }) => {
  it('hands the oldest queued tasks to one worker, each with what it goes on from, each once', async () => {
    const open = await place();
    const a = await open({ holder: 'a' });
    const b = await open({ holder: 'b' });
    try {
      for (const n of [1, 2, 3])
        await a.createTask(`task_${n}`, 'ses', `goal ${n}`, { queued: true, request: { n } });
      // A task that ran before: requeued with its checkpoint, events and calls.
      await a.createTask('task_0', 'ses', 'ran before', { request: { n: 0 } });
      a.appendEvent('task_0', 'task_started', null, {});
      await a.checkpoint('task_0', { step: 1 }, 1);
      await a.callStarted('task_0', 0, 'call_x');
      await a.release('task_0');

      const first = await b.claimNext(2);
      expect(first.map((c) => [c.task.task_id, c.task.status, c.claim.request])).toEqual([
        ['task_1', 'running', { n: 1 }],
        ['task_2', 'running', { n: 2 }],
      ]);
      expect(first[0].claim).toMatchObject({ resumed: false, state: null, calls: [] });
      // A task whose run still ends in this process (its lease lapsed, another requeued it) is not taken.
      expect((await a.claimNext(5, ['task_3', 'task_0'])).map((c) => c.task.task_id)).toEqual([]);
      const rest = await a.claimNext(5);
      expect(rest.map((c) => c.task.task_id)).toEqual(['task_3', 'task_0']);
      expect(rest[1].claim).toEqual({
        resumed: true,
        state: { step: 1 },
        request: { n: 0 },
        calls: [{ index: 0, call_id: 'call_x', finished: false, result: null }],
      });
      expect(await b.claimNext(5)).toEqual([]);
      expect(await b.claim('task_3')).toBeUndefined();
      // Each claimer holds its tasks under their fence, and numbers their events after the last one.
      expect(a.appendEvent('task_0', 'task_resumed', null, {}).seq).toBe(2);
      expect(b.appendEvent('task_1', 'task_started', null, {}).seq).toBe(1);
      expect([a.fenceOf('task_0'), b.fenceOf('task_1'), b.fenceOf('task_3')]).toEqual([3, 1, undefined]);
      await b.finishTask('task_1', {
        status: 'completed',
        final_answer: 'done',
        error: null,
        steps: 1,
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        toolsets_used: [],
        tokens: null as never,
      });
      expect((await a.events('task_1')).map((e) => e.seq)).toEqual([1]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe.each(backends)("a thread's turns on $name", ({ place }) => {
  const done = {
    status: 'completed' as const,
    final_answer: 'done',
    error: null,
    steps: 1,
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    toolsets_used: [],
    tokens: null as never,
  };
  const made = { owner: 'me', title: 't', webhook: null };

  it('are claimed one at a time, in order, by whichever workers claim; a cancel may still claim a waiting one', async () => {
    const open = await place();
    const a = await open({ holder: 'a' });
    const b = await open({ holder: 'b' });
    try {
      await a.createTask('task_t1', 'ses_t', 'turn 1', { queued: true, thread: { id: 'thr_x', made } });
      await a.createTask('task_t2', 'ses_t', 'turn 2', { queued: true, thread: { id: 'thr_x' } });
      await a.createTask('task_t3', 'ses_t', 'turn 3', { queued: true, thread: { id: 'thr_x' } });
      await a.createTask('task_free', 'ses_f', 'no thread', { queued: true });
      // Two workers at once: one turn of the thread between them, and the task of no thread.
      const both = [...(await Promise.all([a.claimNext(5), b.claimNext(5)]))].flat();
      expect(both.map((c) => c.task.task_id).sort()).toEqual(['task_free', 'task_t1']);
      expect(await b.claimNext(5)).toEqual([]);
      const holder = a.fenceOf('task_t1') !== undefined ? a : b;
      await holder.finishTask('task_t1', {
        ...done,
        transcript: { messages: [{ role: 'user', content: 'turn 1' }] },
      });
      expect((await b.claimNext(5)).map((c) => c.task.task_id)).toEqual(['task_t2']);
      // The third waits for the second; a cancel claims it by id all the same.
      expect(await a.claimNext(5)).toEqual([]);
      expect(await a.claim('task_t3')).toBeDefined();
      expect(await a.activeTurn('thr_x')).toEqual({ task_id: 'task_t2', status: 'running' });
      expect(await a.threadTranscripts('thr_x')).toEqual([
        { task_id: 'task_t1', transcript: { messages: [{ role: 'user', content: 'turn 1' }] } },
      ]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("retention keeps a thread's turns while the thread is kept, and prunes an idle thread with them", async () => {
    const open = await place();
    const s = await open();
    try {
      await s.createTask('task_a', 'ses', 'a', { thread: { id: 'thr_idle', made } });
      await s.finishTask('task_a', done);
      await s.createTask('task_b', 'ses', 'b', { thread: { id: 'thr_busy', made } });
      await s.createTask('task_c', 'ses', 'c');
      await s.finishTask('task_c', done);
      const future = new Date(Date.now() + 60_000).toISOString();
      // Tasks alone: only the one of no thread.
      expect(await s.pruneTasks(future, 10)).toBe(1);
      expect(await s.getTask('task_a')).toBeDefined();
      // Threads: the idle one with its task; the one with a task running stays.
      expect(await s.pruneThreads(future, 10)).toBe(1);
      expect(await s.getThread('thr_idle')).toBeUndefined();
      expect(await s.getTask('task_a')).toBeUndefined();
      expect(await s.getThread('thr_busy')).toBeDefined();
      expect(await s.deleteThread('thr_busy')).toEqual({ busy: 'task_b' });
      await s.finishTask('task_b', done);
      expect(await s.deleteThread('thr_busy')).toEqual({ deleted: 1 });
      expect(await s.deleteThread('thr_busy')).toBeUndefined();
    } finally {
      await s.close();
    }
  });
});

describe('claims on PostgreSQL, counted', () => {
  it('cost at most 3 statements per claimed task, and the other processes hear the ids without reading', async () => {
    const url = await freshDatabase('claims_counted');
    const queuer = await createPostgresTaskStore(openPostgres(url, 'test', { max: 4 }), { holder: 'queuer' });
    const workerPool = openPostgres(url, 'test', { max: 4 });
    const worker = await createPostgresTaskStore(workerPool, { holder: 'worker' });
    const heard: QueueChange[] = [];
    const heardByWorker: QueueChange[] = [];
    const stopA = queuer.onQueueChange((c) => heard.push(c));
    const stopB = worker.onQueueChange((c) => heardByWorker.push(c));
    try {
      const ids = Array.from({ length: 12 }, (_, i) => `task_${String(i).padStart(2, '0')}`);
      for (const id of ids)
        await queuer.createTask(id, 'ses', 'x'.repeat(1000), { queued: true, request: { id } });
      await expect.poll(() => heardByWorker.filter((c) => c.kind === 'queued').length).toBe(12);
      const count = counted(workerPool);
      const claimed: string[] = [];
      // As a worker's free slots claim: four at a time, then one at a time as slots free.
      for (const n of [4, 4, 1, 1, 1, 1, 1])
        claimed.push(...(await worker.claimNext(n)).map((c) => c.task.task_id));
      expect(claimed).toEqual(ids);
      expect(count.statements).toBeLessThanOrEqual(3 * claimed.length);
      expect(count.statements).toBe(7);
      // The queuer hears exactly which tasks went (and drops them without a read); the worker, its own claims not.
      await expect
        .poll(() => heard.flatMap((c) => (c.kind === 'claimed' && c.taskIds !== '*' ? c.taskIds : [])))
        .toEqual(ids);
      expect(heardByWorker.filter((c) => c.kind === 'claimed')).toEqual([]);
    } finally {
      stopA();
      stopB();
      await queuer.close();
      await worker.close();
    }
  });
});
