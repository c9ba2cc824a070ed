import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { TaskStore } from '../../../agent-server/store/interface.ts';
import { createPostgresTaskStore, createTaskStore } from '../../../agent-server/store/store.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { STATE_003 } from '../../fixtures/agent-store/state-003.ts';
import { freshDatabase } from '../../helpers/postgres.ts';

// Databases an earlier agent-server left (tests/fixtures/agent-store, made by the store of commit 79ba0f7 with
// make.ts there): the store opens each, upgrades its schema, and finds every row it held (a checkpoint of old,
// its conversation whole, goes on as it was; the next ones append: migration 004).

const fixtures = path.join(import.meta.dirname, '../../fixtures/agent-store');
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function sqliteFrom(name: string): Promise<TaskStore> {
  const dir = await mkdtemp(path.join(tmpdir(), 'agent-fixture-'));
  dirs.push(dir);
  const file = path.join(dir, 'agent.db');
  await copyFile(path.join(fixtures, name), file);
  return createTaskStore(openDatabase(file));
}

async function postgresFrom(name: string): Promise<TaskStore> {
  const url = await freshDatabase('fixture');
  // The dump on a connection of its own (it sets the search path for its session).
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(await readFile(path.join(fixtures, name), 'utf8'));
  } finally {
    await client.end();
  }
  return createPostgresTaskStore(openPostgres(url, 'test', { max: 4 }));
}

const ENDED = ['completed', 'failed', 'max_steps', 'cancelled', 'timed_out'] as const;

/** What the latest version's fixture holds, and that the store goes on using it. */
async function latest(store: TaskStore) {
  try {
    expect(await store.countTasks()).toEqual({
      queued: 1,
      running: 1,
      awaiting_approval: 2,
      completed: 1,
      failed: 1,
      max_steps: 1,
      cancelled: 1,
      timed_out: 1,
    });
    expect((await store.queued()).map((q) => [q.task.task_id, q.request])).toEqual([
      ['task_queued', { max_steps: 7 }],
    ]);
    const paused = await store.awaiting();
    expect(paused.map((p) => [p.task.task_id, p.pending, p.state, p.decision])).toEqual([
      ['task_paused', { call_id: 'call_p', kind: 'approval' }, { messages: ['p'] }, null],
      [
        'task_decided',
        { call_id: 'call_d', kind: 'approval' },
        { messages: ['d'] },
        { approved: true, by: 'operator' },
      ],
    ]);
    for (const status of ENDED) {
      const task = await store.getTask(`task_${status}`);
      expect(task).toMatchObject({ status, steps: 2, toolsets_used: ['file_system_tools'] });
      expect(task?.tokens).toEqual({ tool_definitions: 100, messages: 50, all_toolsets: 900 });
      expect((await store.events(`task_${status}`)).map((e) => [e.seq, e.type, e.data])).toEqual([
        [1, 'task_started', { goal: `a ${status} goal` }],
        [2, 'task_finished', { status }],
      ]);
    }
    expect(await store.calls('task_running')).toEqual([
      { index: 0, call_id: 'call_a', finished: true, result: { content: 'done a' } },
      { index: 1, call_id: 'call_b', finished: false, result: null },
    ]);
    expect((await store.login('h_session'))?.role).toBe('operator');
    expect((await store.takeLoginCode('h_code'))?.role).toBe('viewer');
    // The task a stopped process left running goes back to the queue, and its claim goes on from its checkpoint.
    expect(await store.requeueLapsed(true)).toEqual(['task_running']);
    const claim = await store.claim('task_running');
    expect(claim).toMatchObject({
      resumed: true,
      state: { messages: ['m1'], steps: 1 },
      request: { max_steps: 9 },
    });
    expect(claim?.calls).toHaveLength(2);
    expect(store.appendEvent('task_running', 'model_call', 1, { step: 2 }).seq).toBe(3);
    // On the upgraded schema (migration 004) its next checkpoints append, and a claim puts them together.
    await store.checkpoint('task_running', { steps: 2 }, 2, { start: 0, messages: ['m1', 'm2'] });
    await store.checkpoint('task_running', { steps: 3 }, 3, { start: 2, messages: ['m3'] });
    await store.release('task_running');
    expect((await store.claim('task_running'))?.state).toEqual({ steps: 3, messages: ['m1', 'm2', 'm3'] });
    expect(await store.unpause('task_decided')).toBe(true);
  } finally {
    await store.close();
  }
}

/** What version 1's fixture holds: the columns added since are empty, and its tasks go on. */
async function first(store: TaskStore) {
  try {
    expect(await store.getTask('task_old_done')).toMatchObject({
      status: 'completed',
      final_answer: 'old answer',
      tokens: null,
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      toolsets_used: [],
    });
    expect((await store.events('task_old_done')).map((e) => [e.seq, e.type])).toEqual([
      [1, 'task_started'],
      [2, 'task_finished'],
    ]);
    expect((await store.recentTasks(10)).map((t) => t.task_id)).toEqual([
      'task_old_running',
      'task_old_done',
    ]);
    expect(await store.requeueLapsed(true)).toEqual(['task_old_running']);
    expect(await store.claim('task_old_running')).toMatchObject({ resumed: true, state: null, calls: [] });
  } finally {
    await store.close();
  }
}

/**
 * What the fixture at migration 003 holds (make-003.ts, before checkpoints appended): its running task's whole
 * checkpoint goes on as it was, its next checkpoints append, and a second start applies nothing.
 */
async function before004(open: () => Promise<TaskStore>, migrations: () => Promise<string[]>) {
  const store = await open();
  try {
    expect((await store.awaiting()).map((p) => [p.task.task_id, p.state])).toEqual([
      ['task_paused', STATE_003],
    ]);
    expect(await migrations()).toEqual([
      '001_one_schema',
      '002_threads',
      '003_webhooks',
      '004_checkpoint_parts',
    ]);
    expect(await store.requeueLapsed(true)).toEqual(['task_running']);
    const claim = await store.claim('task_running');
    expect(claim?.state).toEqual(STATE_003);
    expect(claim?.calls).toEqual([
      {
        index: 0,
        call_id: 'call_a',
        finished: true,
        result: { message: { role: 'tool', content: '3 lines' } },
      },
    ]);
    const [system, user, reply] = STATE_003.messages;
    const tool = { role: 'tool', tool_call_id: 'call_a', content: '3 lines' };
    await store.checkpoint('task_running', { steps: 2 }, 2, {
      start: 0,
      messages: [system, user, reply, tool],
    });
    await store.checkpoint('task_running', { steps: 3 }, 3, { start: 4, messages: [reply] });
    await store.release('task_running');
    expect((await store.claim('task_running'))?.state).toEqual({
      steps: 3,
      messages: [system, user, reply, tool, reply],
    });
  } finally {
    await store.close();
  }
  const again = await open();
  expect((await again.getTask('task_paused'))?.status).toBe('awaiting_approval');
  await again.close();
  expect(await migrations()).toHaveLength(4);
}

/** The migrations a database recorded, in order. */
const MIGRATIONS = 'SELECT name FROM agent_migrations ORDER BY name';

describe('the task store on databases an earlier version left', () => {
  it('SQLite at migration 003: a whole checkpoint goes on, the next ones append, once migrated', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-fixture-'));
    dirs.push(dir);
    const file = path.join(dir, 'agent.db');
    await copyFile(path.join(fixtures, 'agent-003.db'), file);
    const migrations = async () => {
      const db = new Database(file, { readonly: true });
      try {
        return (db.prepare(MIGRATIONS).all() as { name: string }[]).map((r) => r.name);
      } finally {
        db.close();
      }
    };
    await before004(async () => createTaskStore(openDatabase(file)), migrations);
  });
  it('PostgreSQL at migration 003: a whole checkpoint goes on, the next ones append, once migrated', async () => {
    const url = await freshDatabase('fixture');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(await readFile(path.join(fixtures, 'postgres-003.sql'), 'utf8'));
    } finally {
      await client.end();
    }
    const migrations = async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        return (await c.query(MIGRATIONS)).rows.map((r) => r.name as string);
      } finally {
        await c.end();
      }
    };
    await before004(() => createPostgresTaskStore(openPostgres(url, 'test', { max: 4 })), migrations);
  });
  it('SQLite at schema version 5: every task, event, call record, pause and login', async () => {
    await latest(await sqliteFrom('agent-v5.db'));
  });
  it('SQLite at schema version 1: its tasks and events, the newer columns empty', async () => {
    await first(await sqliteFrom('agent-v1.db'));
  });
  it('PostgreSQL at schema version 4: every task, event, call record, pause and login', async () => {
    await latest(await postgresFrom('postgres-v4.sql'));
  });
  it('PostgreSQL at schema version 1: its tasks and events, the newer columns empty', async () => {
    await first(await postgresFrom('postgres-v1.sql'));
  });
});
