import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import type { TaskEvent } from '../../../agent-server/contract.ts';
import { sqliteDb } from '../../../lib/db/kysely.ts';
import { openDatabase } from '../../../lib/db/sqlite.ts';
import { LimitReached } from '../../../lib/identity/limits.ts';
import { type Quota, quotaOf } from '../../../lib/identity/quota.ts';
import type { IdentityDatabase } from '../../../lib/identity/schema.ts';
import { IdentityStore } from '../../../lib/identity/store.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// A task counts against its owner's limits while it runs: each model call's tokens against the day's, each tool
// call against the minute's. Spent tokens end the task saying whose limit; a tool call past the minute's waits.

let stack: Stack | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const listDirs = () => calls(call('list_allowed_directories', {}));

it("ends a task once its owner's model tokens of the day are spent, naming the limit and whose", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'quota-'));
  dirs.push(dir);
  const identity = new IdentityStore(sqliteDb<IdentityDatabase>(openDatabase(path.join(dir, 'identity.db'))));
  try {
    const dan = await identity.addUser({ name: 'dan', limits: { model_tokens_per_day: 20 } });
    // Each scripted reply counts 15 tokens: the first call leaves 5 of 20, the second spends them, the third waits.
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
      listDirs(),
      answer('never asked'),
    ]);
    stack = await makeStack({ model, quotaOf: (owner) => quotaOf(identity, owner) });
    const events: TaskEvent[] = [];
    const done = await stack.agent.execute({ goal: 'count my tokens' }, (e) => events.push(e), {
      owner: `user:${dan.id}`,
      all: false,
    });
    expect(done.status).toBe('failed');
    expect(done.error).toMatch(
      /^Task failed: user dan reached the limit model_tokens_per_day \(20\); it resets in \d+ s$/,
    );
    expect(model.requests).toHaveLength(2);
    // Someone else's task (the service token's) is not held by dan's limit.
    const other = new ScriptedModel([answer('free')]);
    await stack.close();
    stack = await makeStack({ model: other, quotaOf: (owner) => quotaOf(identity, owner) });
    expect((await stack.agent.execute({ goal: 'not dan' })).status).toBe('completed');
  } finally {
    await identity.close();
  }
});

it('stops the tasks of a user who was removed: their quota refuses every further call, saying why', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'quota-'));
  dirs.push(dir);
  const identity = new IdentityStore(sqliteDb<IdentityDatabase>(openDatabase(path.join(dir, 'identity.db'))));
  try {
    const gone = await identity.addUser({ name: 'gone' });
    await identity.removeUser('gone');
    const quota = await quotaOf(identity, `user:${gone.id}`);
    await expect(quota?.beforeModel()).rejects.toThrow(/the user this task runs for was removed/);
    await expect(quota?.beforeToolCall()).rejects.toThrow(/was removed/);
    // A token's task, or a user with no limits, has none.
    expect(await quotaOf(identity, 'local')).toBeUndefined();
  } finally {
    await identity.close();
  }
});

it('waits out the minute when a tool call is past its limit, told as limit_wait, then runs the call', async () => {
  let refused = 0;
  const quota: Quota = {
    beforeModel: async () => {},
    afterModel: async () => {},
    async beforeToolCall() {
      if (refused++ === 0) {
        const subject = { key: 'user:u1', label: 'user eve', limits: { tool_calls_per_minute: 1 } };
        throw new LimitReached('tool_calls_per_minute', subject, 1);
      }
    },
  };
  const model = new ScriptedModel([
    calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] })),
    listDirs(),
    answer('listed'),
  ]);
  stack = await makeStack({ model, quotaOf: async () => quota });
  const events: TaskEvent[] = [];
  const done = await stack.agent.execute({ goal: 'list' }, (e) => events.push(e), {
    owner: 'user:u1',
    all: false,
  });
  expect(done.status).toBe('completed');
  const wait = events.find((e) => e.type === 'limit_wait');
  expect(wait?.data).toMatchObject({ limit: 'tool_calls_per_minute', subject: 'user eve', seconds: 1 });
  // The activation is not a tool call of the limit's; the listing was counted twice (refused, then taken).
  expect(refused).toBe(2);
  const types = events.map((e) => e.type);
  expect(types.indexOf('limit_wait')).toBeLessThan(types.lastIndexOf('tool_call'));
  expect(events.filter((e) => e.type === 'tool_call').every((e) => e.data.ok)).toBe(true);
});
