import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type {
  StoreOptions,
  TaskOutcome,
  TaskStore,
  WebhookToSend,
} from '../../../agent-server/store/interface.ts';
import { LeaseLost } from '../../../agent-server/store/interface.ts';
import { createPostgresTaskStore, createTaskStore } from '../../../agent-server/store/store.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// Tasks' webhook deliveries in the store, on both databases: written with the end or pause they tell (and only
// then), once per task and happening, claimed by one worker at a time, retried, given up, deleted with the task.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

type Open = (opts?: StoreOptions) => Promise<TaskStore>;

const backends: { name: string; fresh: () => Promise<Open> }[] = [
  {
    name: 'SQLite',
    async fresh() {
      const dir = await mkdtemp(path.join(tmpdir(), 'webhook-store-'));
      dirs.push(dir);
      const file = path.join(dir, 'agent.db');
      return async (opts) => createTaskStore(openDatabase(file), opts);
    },
  },
  {
    name: 'PostgreSQL',
    async fresh() {
      const url = await freshDatabase('hooks');
      return (opts) => createPostgresTaskStore(openPostgres(url, 'test', { max: 4 }), opts);
    },
  },
];

const outcome: TaskOutcome = {
  status: 'completed',
  final_answer: 'done',
  error: null,
  steps: 1,
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  toolsets_used: [],
  tokens: null as unknown as TaskOutcome['tokens'],
};

const hook = (id: string, key = 'finished'): WebhookToSend => ({
  id,
  kind: key === 'finished' ? 'task.finished' : 'task.waiting',
  key,
  url: 'https://example.test/hook',
  payload: JSON.stringify({ id }),
});

describe.each(backends)('webhook deliveries on $name', (backend) => {
  it('records a POST with the end, due at once and claimed once; a 2xx marks it delivered', async () => {
    const store = await (await backend.fresh())();
    try {
      let woken = 0;
      store.onWebhookDue(() => woken++);
      await store.createTask('task_a', 'ses', 'goal');
      await store.finishTask('task_a', outcome, hook('msg_a'));
      expect(woken).toBe(1);
      const [due, ...more] = await store.claimWebhooks(10, 60_000);
      expect(more).toEqual([]);
      expect(due).toMatchObject({ id: 'msg_a', task_id: 'task_a', kind: 'task.finished', attempts: 1 });
      expect(JSON.parse(due.payload)).toEqual({ id: 'msg_a' });
      // Claimed: no other claim takes it while the lease holds.
      expect(await store.claimWebhooks(10, 60_000)).toEqual([]);
      await store.webhookDelivered('msg_a');
      expect(await store.webhookDeliveries('task_a')).toEqual([
        expect.objectContaining({ id: 'msg_a', status: 'delivered', attempts: 1, last_error: null }),
      ]);
      expect((await store.webhookDeliveries('task_a'))[0].delivered_at).not.toBeNull();
    } finally {
      await store.close();
    }
  });

  it('records nothing for an end that is refused, and one POST per task and happening', async () => {
    const open = await backend.fresh();
    const a = await open({ holder: 'a', leaseMs: 60_000 });
    const b = await open({ holder: 'b', leaseMs: 60_000 });
    try {
      await a.createTask('task_f', 'ses', 'fenced');
      // b took the task over: a's end is refused, and so is its webhook.
      expect(await b.requeueLapsed(true)).toEqual(['task_f']);
      await b.claim('task_f');
      await expect(a.finishTask('task_f', outcome, hook('msg_from_a'))).rejects.toBeInstanceOf(LeaseLost);
      expect(await b.webhookDeliveries('task_f')).toEqual([]);
      // The same wait recorded twice (paused, resumed, paused again for the same call): one POST.
      await b.pause('task_f', { call_id: 'call_1' }, { s: 1 }, 1, hook('msg_wait_1', 'waiting:call_1'));
      expect(await b.unpause('task_f')).toBe(true);
      await b.pause('task_f', { call_id: 'call_1' }, { s: 2 }, 1, hook('msg_wait_2', 'waiting:call_1'));
      expect(await b.unpause('task_f')).toBe(true);
      await b.finishTask('task_f', outcome, hook('msg_end'));
      const rows = await b.webhookDeliveries('task_f');
      expect(rows.map((r) => [r.id, r.kind, r.status])).toEqual([
        ['msg_wait_1', 'task.waiting', 'pending'],
        ['msg_end', 'task.finished', 'pending'],
      ]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('gives each due POST to one of two workers claiming at once', async () => {
    const open = await backend.fresh();
    const a = await open({ holder: 'a' });
    const b = await open({ holder: 'b' });
    try {
      const ids = Array.from({ length: 20 }, (_, i) => `task_${i}`);
      for (const id of ids) {
        await a.createTask(id, 'ses', 'goal');
        await a.finishTask(id, outcome, hook(`msg_${id}`));
      }
      const claimed: string[] = [];
      for (let round = 0; round < 10 && claimed.length < ids.length; round++) {
        const [x, y] = await Promise.all([a.claimWebhooks(3, 60_000), b.claimWebhooks(3, 60_000)]);
        claimed.push(...[...x, ...y].map((d) => d.id));
      }
      expect(claimed.sort()).toEqual(ids.map((id) => `msg_${id}`).sort());
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('retries a failed POST when it is due, gives it up as failed, and deletes it with its task', async () => {
    let now = Date.now();
    const store = await (await backend.fresh())({ now: () => now });
    try {
      await store.createTask('task_r', 'ses', 'goal');
      await store.finishTask('task_r', outcome, hook('msg_r'));
      await store.claimWebhooks(1, 60_000);
      await store.webhookRetry('msg_r', 'HTTP 500 from example.test', now + 5_000);
      expect(await store.claimWebhooks(1, 60_000)).toEqual([]);
      now += 5_000;
      const [again] = await store.claimWebhooks(1, 60_000);
      expect(again).toMatchObject({ id: 'msg_r', attempts: 2 });
      await store.webhookRetry('msg_r', 'connection refused');
      now += 3_600_000;
      expect(await store.claimWebhooks(1, 60_000)).toEqual([]);
      expect(await store.webhookDeliveries('task_r')).toEqual([
        expect.objectContaining({ status: 'failed', attempts: 2, last_error: 'connection refused' }),
      ]);
      // A claim whose worker stopped mid-POST lapses: another claims it again.
      await store.createTask('task_l', 'ses', 'goal');
      await store.finishTask('task_l', outcome, hook('msg_l'));
      expect(await store.claimWebhooks(1, 1_000)).toHaveLength(1);
      now += 1_000;
      expect(await store.claimWebhooks(1, 1_000)).toEqual([expect.objectContaining({ attempts: 2 })]);
      expect(await store.pruneTasks(new Date(Date.now() + 60_000).toISOString(), 10)).toBe(2);
      expect(await store.webhookDeliveries('task_r')).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
