import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { LoopSnapshot } from '../../../agent-server/loop/state.ts';
import { LeaseLost, type StoreOptions, type TaskStore } from '../../../agent-server/store/interface.ts';
import { createPostgresTaskStore, createTaskStore } from '../../../agent-server/store/store.ts';
import { checkpointWriter } from '../../../agent-server/tasks/checkpoint.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// The store's contract for checkpoints that append (store/checkpoints.ts), on SQLite and PostgreSQL: each
// checkpoint stores the messages added since the last one, a claim gets the whole conversation back, a base
// drops the parts before it, an append that does not go on from the parts or comes from a worker that lost the
// task is refused, and a pause or an end leaves no part behind. What is in the rows is read with SQL.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

type Part = { start: number; bytes: number };

interface Place {
  open: (opts?: StoreOptions) => Promise<TaskStore>;
  /** The task's checkpoint parts as stored: where each starts, and the length of its text. */
  parts: (taskId: string) => Promise<Part[]>;
  /** The length of the task's resume_state. */
  stateBytes: (taskId: string) => Promise<number>;
  /** Deletes one part by hand (a database edited outside toolshift). */
  dropPart: (taskId: string, start: number) => Promise<void>;
}

const backends = [
  {
    name: 'SQLite',
    async fresh(): Promise<Place> {
      const dir = await mkdtemp(path.join(tmpdir(), 'checkpoint-parts-'));
      dirs.push(dir);
      const file = path.join(dir, 'agent.db');
      const read = <T>(q: string, id: string) => {
        const db = new Database(file, { readonly: true });
        try {
          return db.prepare(q).all(id) as T[];
        } finally {
          db.close();
        }
      };
      return {
        open: async (opts) => createTaskStore(openDatabase(file), opts),
        parts: async (id) =>
          read<Part>(
            'SELECT start, length(data) AS bytes FROM task_checkpoint_parts WHERE task_id = ? ORDER BY start',
            id,
          ),
        stateBytes: async (id) =>
          read<{ n: number }>('SELECT length(resume_state) AS n FROM tasks WHERE task_id = ?', id)[0].n,
        dropPart: async (id, start) => {
          const db = new Database(file);
          try {
            db.prepare('DELETE FROM task_checkpoint_parts WHERE task_id = ? AND start = ?').run(id, start);
          } finally {
            db.close();
          }
        },
      };
    },
  },
  {
    name: 'PostgreSQL',
    async fresh(): Promise<Place> {
      const url = await freshDatabase('checkpoints');
      const read = async <T>(q: string, ...args: unknown[]) => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          return (await client.query(q, args)).rows as T[];
        } finally {
          await client.end();
        }
      };
      return {
        open: (opts) => createPostgresTaskStore(openPostgres(url, 'test', { max: 4 }), opts),
        parts: async (id) =>
          (
            await read<{ start: number; bytes: number }>(
              'SELECT start, length(data) AS bytes FROM task_checkpoint_parts WHERE task_id = $1 ORDER BY start',
              id,
            )
          ).map((r) => ({ start: Number(r.start), bytes: Number(r.bytes) })),
        stateBytes: async (id) =>
          Number(
            (
              await read<{ n: number }>('SELECT length(resume_state) AS n FROM tasks WHERE task_id = $1', id)
            )[0].n,
          ),
        dropPart: async (id, start) => {
          await read('DELETE FROM task_checkpoint_parts WHERE task_id = $1 AND start = $2', id, start);
        },
      };
    },
  },
];

const msg = (i: number) => ({ role: 'tool', tool_call_id: `c${i}`, content: `result ${i} `.repeat(50) });
const msgs = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => msg(from + i));
const header = (steps: number) => ({ steps, usage: { total_tokens: steps * 10 }, pending: { step: steps } });

/** A store that took the task over (its worker closed): what its claim gives. */
async function takeOver(place: Place, taskId: string) {
  const store = await place.open({ holder: 'b' });
  await store.requeueLapsed(true);
  return { store, claim: await store.claim(taskId) };
}

describe.each(backends)('checkpoints that append, on $name', (backend) => {
  it('stores each step’s new messages once, and a claim gets the whole conversation back', async () => {
    const place = await backend.fresh();
    const a = await place.open({ holder: 'a' });
    await a.createTask('task_c', 'ses', 'appends');
    await a.checkpoint('task_c', header(1), 1, { start: 0, messages: msgs(0, 3) });
    await a.checkpoint('task_c', header(2), 2, { start: 3, messages: msgs(3, 5) });
    await a.checkpoint('task_c', header(3), 3, { start: 5, messages: msgs(5, 6) });
    await a.callStarted('task_c', 0, 'call_x');
    // Each part holds what its checkpoint added, and nothing of the parts before it.
    const parts = await place.parts('task_c');
    expect(parts.map((p) => p.start)).toEqual([0, 3, 5]);
    expect(parts.map((p) => p.bytes)).toEqual([
      JSON.stringify(msgs(0, 3)).length,
      JSON.stringify(msgs(3, 5)).length,
      JSON.stringify(msgs(5, 6)).length,
    ]);
    expect(await place.stateBytes('task_c')).toBe(JSON.stringify(header(3)).length);
    await a.close();
    const { store: b, claim } = await takeOver(place, 'task_c');
    try {
      expect(claim?.state).toEqual({ ...header(3), messages: msgs(0, 6) });
      expect(claim?.calls).toEqual([{ index: 0, call_id: 'call_x', finished: false, result: null }]);
      // The new worker's first checkpoint is a base: the parts before it go.
      await b.checkpoint('task_c', header(4), 4, { start: 0, messages: msgs(0, 7) });
      await b.callStarted('task_c', 0, 'call_y');
      expect((await place.parts('task_c')).map((p) => p.start)).toEqual([0]);
      await b.checkpoint('task_c', header(5), 5, { start: 7, messages: msgs(7, 9) });
      await b.finishTask('task_c', {
        status: 'completed',
        final_answer: 'done',
        error: null,
        steps: 5,
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
        toolsets_used: [],
        tokens: {} as never,
      });
      // Its end drops the parts (the transcript keeps the conversation).
      expect(await place.parts('task_c')).toEqual([]);
    } finally {
      await b.close();
    }
  });

  it('refuses an append that does not start where the parts end, and one from a worker that lost the task', async () => {
    const place = await backend.fresh();
    const a = await place.open({ holder: 'a', leaseMs: 60_000 });
    const b = await place.open({ holder: 'b', leaseMs: 60_000 });
    const lost: string[] = [];
    a.onLeaseLost((id) => lost.push(id));
    try {
      // A gap: the append is refused as a lost lease, and the checkpoint before it stands.
      await a.createTask('task_g', 'ses', 'gaps');
      await a.checkpoint('task_g', header(1), 1, { start: 0, messages: msgs(0, 2) });
      await a.checkpoint('task_g', header(2), 2, { start: 4, messages: msgs(4, 5) });
      await expect(a.callStarted('task_g', 0, 'call_x')).rejects.toBeInstanceOf(LeaseLost);
      expect(lost).toEqual(['task_g']);
      expect((await place.parts('task_g')).map((p) => p.start)).toEqual([0]);
      // A worker whose task another claimed (a froze past its lease) appends: refused, the rows as they were.
      await a.createTask('task_h', 'ses', 'fenced');
      await a.checkpoint('task_h', header(1), 1, { start: 0, messages: msgs(0, 2) });
      await a.flush();
      expect((await b.requeueLapsed(true)).sort()).toEqual(['task_g', 'task_h']);
      expect((await b.claim('task_g'))?.state).toEqual({ ...header(1), messages: msgs(0, 2) });
      expect((await b.claim('task_h'))?.state).toEqual({ ...header(1), messages: msgs(0, 2) });
      await a.checkpoint('task_h', header(2), 2, { start: 2, messages: msgs(2, 3) });
      await expect(a.callStarted('task_h', 0, 'call_late')).rejects.toBeInstanceOf(LeaseLost);
      expect((await place.parts('task_h')).map((p) => p.start)).toEqual([0]);
      expect(lost).toEqual(['task_g', 'task_h']);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('fails a claim’s checkpoint whose parts no longer tile it, saying so, and claims the others', async () => {
    const place = await backend.fresh();
    const a = await place.open({ holder: 'a' });
    await a.createTask('task_t', 'ses', 'tampered');
    await a.checkpoint('task_t', header(1), 1, { start: 0, messages: msgs(0, 2) });
    await a.checkpoint('task_t', header(2), 2, { start: 2, messages: msgs(2, 3) });
    await a.checkpoint('task_t', header(3), 3, { start: 3, messages: msgs(3, 4) });
    await a.createTask('task_ok', 'ses', 'fine');
    await a.checkpoint('task_ok', header(1), 1, { start: 0, messages: msgs(0, 1) });
    await a.close();
    await place.dropPart('task_t', 2);
    const b = await place.open({ holder: 'b' });
    try {
      await b.requeueLapsed(true);
      const claimed = await b.claimNext(5);
      expect(claimed.map((c) => [c.task.task_id, c.claim.state, c.claim.unreadable])).toEqual([
        [
          'task_t',
          null,
          'the checkpoint of task task_t holds 4 messages but its stored parts tile 2: its conversation cannot be rebuilt',
        ],
        ['task_ok', { ...header(1), messages: msgs(0, 1) }, undefined],
      ]);
    } finally {
      await b.close();
    }
  });

  it('keeps a pause whole and drops the parts; a checkpoint of old (no part) reads as it was', async () => {
    const place = await backend.fresh();
    const a = await place.open();
    try {
      await a.createTask('task_p', 'ses', 'pauses');
      await a.checkpoint('task_p', header(1), 1, { start: 0, messages: msgs(0, 2) });
      await a.pause('task_p', { call_id: 'c', kind: 'approval' }, { ...header(1), messages: msgs(0, 3) }, 1);
      expect(await place.parts('task_p')).toEqual([]);
      expect((await a.awaiting())[0].state).toEqual({ ...header(1), messages: msgs(0, 3) });
      await a.createTask('task_o', 'ses', 'old');
      await a.checkpoint('task_o', header(1), 1, { start: 0, messages: msgs(0, 2) });
      await a.checkpoint('task_o', { ...header(2), messages: msgs(0, 4) }, 2);
      await a.flush();
      expect(await place.parts('task_o')).toEqual([]);
    } finally {
      await a.close();
    }
    const { store: b, claim } = await takeOver(place, 'task_o');
    try {
      expect(claim?.state).toEqual({ ...header(2), messages: msgs(0, 4) });
    } finally {
      await b.close();
    }
  });

  it('writes a 20-step task’s conversation about once, where whole checkpoints wrote it over and over', async () => {
    const place = await backend.fresh();
    const a = await place.open({ holder: 'a' });
    await a.createTask('task_20', 'ses', 'twenty steps');
    const writer = checkpointWriter(a, 'task_20', () => undefined);
    const messages: LoopSnapshot['messages'] = [
      { role: 'system', content: 'system prompt '.repeat(100) },
      { role: 'user', content: 'the goal' },
    ];
    let written = 0;
    let whole = 0;
    for (let step = 1; step <= 20; step++) {
      messages.push({
        role: 'assistant',
        content: null,
        tool_calls: [{ id: `c${step}`, type: 'function', function: { name: 'read', arguments: '{}' } }],
      });
      const snapshot = {
        messages,
        steps: step,
        usage: { prompt_tokens: step, completion_tokens: step, total_tokens: 2 * step },
        tokens: {} as LoopSnapshot['tokens'],
        used: [],
        pending: { step, calls: [], index: 0, done: [], tools: [] },
      } as LoopSnapshot;
      await writer.write(snapshot);
      await a.callStarted('task_20', 0, `c${step}`);
      const parts = await place.parts('task_20');
      written += (parts.at(-1)?.bytes ?? 0) + (await place.stateBytes('task_20'));
      whole += JSON.stringify(snapshot).length;
      messages.push({ role: 'tool', tool_call_id: `c${step}`, content: `result ${step} `.repeat(200) });
    }
    const parts = await place.parts('task_20');
    expect(parts).toHaveLength(20);
    const conversation = JSON.stringify(messages).length;
    // The parts together are the conversation as of the last checkpoint (less its last result), brackets apart.
    const inParts = parts.reduce((n, p) => n + p.bytes, 0);
    expect(inParts).toBeLessThan(conversation);
    expect(written).toBeLessThan(2 * conversation);
    expect(whole).toBeGreaterThan(8 * conversation);
    await a.close();
    const { store: b, claim } = await takeOver(place, 'task_20');
    try {
      expect((claim?.state as LoopSnapshot | undefined)?.messages).toEqual(messages.slice(0, -1));
    } finally {
      await b.close();
    }
  });
});
