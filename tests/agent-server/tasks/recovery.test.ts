import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack, type StackOptions } from '../../helpers/stack.ts';

// A task whose worker stops mid-task goes on from its checkpoint on the next worker (here: the next start of
// an agent-server on the same store, both stores): calls recorded as ended are not run again, a read-only or
// idempotent call in flight runs again, and a call in flight that is neither waits for a human, who decides
// whether it runs again, is skipped, or ends the task. The effect on disk shows what ran.

const stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
});

const FILE_TOOLS = {
  'files.yaml': `id: files
description: Read and edit files.
tools: [read_text_file, write_file, edit_file]
`,
};

const activate = call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['files'] }, 'call_activate');
const append = (id: string) =>
  call('edit_file', { path: 'count.txt', edits: [{ old_text: 'x', new_text: 'xy' }] }, id);
const read = (id: string) => call('read_text_file', { path: 'count.txt' }, id);
/** A file of some 3,000 tokens, and a read of it. */
const BIG = Array.from({ length: 1500 }, (_, i) => `row${i}`).join(' ');
const bigRead = (id: string) => call('read_text_file', { path: 'big.txt' }, id);

/**
 * Holds the agent-server's `nth` call of `tool` at the gateway until released (the call then runs there, whatever
 * became of the worker), counting how many reached the gateway.
 */
function holdCalls(tool: string, nth = 1) {
  const seen: string[] = [];
  let release: () => void = () => {};
  const released = new Promise<void>((r) => {
    release = r;
  });
  let arrived: () => void = () => {};
  const inFlight = new Promise<void>((r) => {
    arrived = r;
  });
  const intercept: NonNullable<StackOptions['interceptGateway']> = async (req, next) => {
    const name = /\/mcp\/tools\/([^/]+)\/call$/.exec(new URL(req.url).pathname)?.[1];
    if (name) seen.push(name);
    if (name === tool && seen.filter((n) => n === tool).length === nth) {
      arrived();
      await released;
    }
    return next();
  };
  return { intercept, seen, inFlight, release: () => release() };
}

const backends = [
  { name: 'SQLite', database: async () => undefined },
  { name: 'PostgreSQL', database: () => freshDatabase('recovery') },
];

describe.each(backends)('a task whose worker stops mid-call, on $name', (backend) => {
  /**
   * Runs a task on a first agent-server until `tool`'s call is in flight, stops that agent-server, lets the
   * call finish at the gateway, and starts a second agent-server on the same data with `after` as its model.
   */
  async function stopMidCall(
    first: ScriptedModel,
    tool: string,
    after: ScriptedModel,
    more: Pick<StackOptions, 'contextTokens'> = {},
    nth = 1,
    between?: (a: Stack, databaseUrl: string | undefined) => Promise<void>,
  ) {
    const databaseUrl = await backend.database();
    const hold = holdCalls(tool, nth);
    const a = await makeStack({
      model: first,
      toolsets: FILE_TOOLS,
      databaseUrl,
      interceptGateway: hold.intercept,
      ...more,
    });
    await mkdir(a.root, { recursive: true });
    await writeFile(path.join(a.root, 'count.txt'), 'x');
    await writeFile(path.join(a.root, 'big.txt'), BIG);
    const submitted = await a.post(a.agentApp, '/agent/execute_task', { goal: 'count', wait: false });
    expect(submitted.status).toBe(202);
    const taskId = submitted.body.task_id as string;
    await hold.inFlight;
    // The worker stops while the call is at the gateway, which completes it afterwards.
    const closing = a.close(true);
    hold.release();
    await closing;
    await between?.(a, databaseUrl);
    const b = await makeStack({
      model: after,
      toolsets: FILE_TOOLS,
      dataDir: a.dataDir,
      paths: await PathGuard.create({ roots: [a.root], readOnlyRoots: [] }),
      databaseUrl,
      ...more,
      interceptGateway: hold.intercept,
    });
    stacks.push(b);
    const onDisk = () => readFile(path.join(a.root, 'count.txt'), 'utf8');
    return { taskId, b, seen: hold.seen, onDisk };
  }

  const taskOf = async (s: Stack, id: string) => (await s.get(s.agentApp, `/agent/tasks/${id}`)).body;

  it('answers the calls that ended from their records, and runs a read-only call in flight again', async () => {
    const first = new ScriptedModel([calls(activate), calls(append('call_append'), read('call_read'))]);
    const after = new ScriptedModel([answer('the count is xy')]);
    const { taskId, b, seen, onDisk } = await stopMidCall(first, 'read_text_file', after);
    await expect.poll(async () => (await taskOf(b, taskId)).status, { timeout: 5000 }).toBe('completed');
    const task = await taskOf(b, taskId);
    expect(task.final_answer).toBe('the count is xy');
    // The edit ran once (its record said it ended); the read ran twice (in flight, and it is read-only).
    expect(await onDisk()).toBe('xy');
    expect(seen.filter((n) => n === 'edit_file')).toHaveLength(1);
    expect(seen.filter((n) => n === 'read_text_file')).toHaveLength(2);
    const messages = after.toolMessages(0);
    expect(messages.call_append).toContain('count.txt');
    expect(messages.call_read).toContain('xy');
    const events = task.events as { seq: number; type: string; data: Record<string, unknown> }[];
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.find((e) => e.type === 'task_resumed')?.data).toMatchObject({
      step: 2,
      calls_done: 1,
      unknown: 'read_text_file',
      rerun: true,
    });
    expect(events.filter((e) => e.type === 'task_started')).toHaveLength(1);
  });

  it.each([
    {
      compaction: false,
      steps: [append('call_e1'), append('call_e2'), append('call_e3'), append('call_e4')],
    },
    // Under a small context budget the first read is moved out of the view before the takeover: the view the
    // next worker sends is made from the same messages and the same compaction.
    {
      compaction: true,
      contextTokens: 9000,
      steps: [bigRead('call_b1'), bigRead('call_b2'), append('call_e1'), append('call_e2')],
    },
  ])(
    'taken over after several steps, asks the model what a run never taken over asks (compaction: $compaction)',
    async (c) => {
      // Steps of reads and edits, then a read that is in flight when the worker stops: the checkpoints before it
      // were appended, step by step, and the next worker puts the conversation together from them.
      const script = () => [calls(activate), ...c.steps.map((s) => calls(s)), calls(read('call_read'))];
      const more = c.contextTokens ? { contextTokens: c.contextTokens } : {};
      const first = new ScriptedModel(script());
      const after = new ScriptedModel([answer('the count is read')]);
      const reads = c.steps.filter((s) => s.function.name === 'read_text_file').length;
      const { taskId, b } = await stopMidCall(first, 'read_text_file', after, more, reads + 1);
      await expect.poll(async () => (await taskOf(b, taskId)).status, { timeout: 5000 }).toBe('completed');
      const events = (await taskOf(b, taskId)).events as { type: string }[];
      const resumedAt = events.findIndex((e) => e.type === 'task_resumed');
      expect(resumedAt).toBeGreaterThan(0);
      expect(events.slice(0, resumedAt).some((e) => e.type === 'context_compacted')).toBe(c.compaction);
      // The same task, run through on one worker.
      const whole = new ScriptedModel([...script(), answer('the count is read')]);
      const s = await makeStack({
        model: whole,
        toolsets: FILE_TOOLS,
        databaseUrl: await backend.database(),
        ...more,
      });
      stacks.push(s);
      await mkdir(s.root, { recursive: true });
      await writeFile(path.join(s.root, 'count.txt'), 'x');
      await writeFile(path.join(s.root, 'big.txt'), BIG);
      const run = await s.post(s.agentApp, '/agent/execute_task', { goal: 'count', wait: true });
      expect(run.body.status).toBe('completed');
      const taken = after.requests[0].messages;
      const straight = whole.requests[c.steps.length + 2].messages;
      expect(taken.length).toBe(straight.length);
      // Each stack's workspace and the files' times aside, the messages are the same.
      const plain = (m: unknown) =>
        JSON.stringify(m)
          .replace(/\/[^"\\]*toolshift-[^/"\\]+/g, '<root>')
          .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, '<time>');
      expect(taken.map(plain)).toEqual(straight.map(plain));
    },
  );

  it('ends failed, saying why, when the checkpoint it would go on from cannot be put together', async () => {
    const first = new ScriptedModel([calls(activate), calls(append('call_e1')), calls(read('call_read'))]);
    const after = new ScriptedModel([answer('never asked')]);
    // Its first part deleted by hand while no worker runs it.
    const tamper = async (a: Stack, url: string | undefined) => {
      const statement = 'DELETE FROM task_checkpoint_parts WHERE start = 0';
      if (url) {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.query(statement).finally(() => client.end());
      } else {
        const db = new Database(path.join(a.dataDir, 'agent.db'));
        db.exec(statement);
        db.close();
      }
    };
    const { taskId, b, seen } = await stopMidCall(first, 'read_text_file', after, {}, 1, tamper);
    await expect.poll(async () => (await taskOf(b, taskId)).status, { timeout: 5000 }).toBe('failed');
    expect((await taskOf(b, taskId)).error).toMatch(/its conversation cannot be rebuilt/);
    // Nothing ran again and the model was not asked.
    expect(seen.filter((n) => n === 'read_text_file')).toHaveLength(1);
    expect(after.requests).toHaveLength(0);
  });

  it.each([
    { decision: { approve: false, reason: 'it ran' }, status: 'completed', onDisk: 'xy', runs: 1 },
    { decision: { approve: true }, status: 'completed', onDisk: 'xyy', runs: 2 },
    {
      decision: { approve: false, fail: true, reason: 'check by hand' },
      status: 'failed',
      onDisk: 'xy',
      runs: 1,
    },
  ])('does not run a call of unknown outcome again by itself: a human decides ($decision)', async (c) => {
    const first = new ScriptedModel([calls(activate), calls(append('call_append'))]);
    const after = new ScriptedModel([answer('done')]);
    const { taskId, b, seen, onDisk } = await stopMidCall(first, 'edit_file', after);
    await expect
      .poll(async () => (await taskOf(b, taskId)).status, { timeout: 5000 })
      .toBe('awaiting_approval');
    // The edit ran once, at the gateway, after its worker stopped: it is not run again while a human decides.
    expect(await onDisk()).toBe('xy');
    expect(seen.filter((n) => n === 'edit_file')).toHaveLength(1);
    const listed = (await b.get(b.agentApp, '/agent/approvals')).body.approvals;
    expect(listed).toEqual([
      expect.objectContaining({
        task_id: taskId,
        call_id: 'call_append',
        kind: 'unknown_outcome',
        subject: 'edit_file',
        reason: expect.stringContaining('the outcome of edit_file is unknown'),
      }),
    ]);
    const decided = await b.post(b.agentApp, `/agent/tasks/${taskId}/approvals/call_append`, c.decision);
    expect(decided.status).toBe(200);
    // Decided once: a second decision is refused (decided already, or no longer waited for).
    const again = await b.post(b.agentApp, `/agent/tasks/${taskId}/approvals/call_append`, c.decision);
    expect([404, 409]).toContain(again.status);
    await expect.poll(async () => (await taskOf(b, taskId)).status, { timeout: 5000 }).toBe(c.status);
    expect(await onDisk()).toBe(c.onDisk);
    expect(seen.filter((n) => n === 'edit_file')).toHaveLength(c.runs);
    // The task's record says who decided, when, and the reason given (none: null).
    const events = (await taskOf(b, taskId)).events as { type: string; data: Record<string, unknown> }[];
    expect(events.find((e) => e.type === 'approval_decided')?.data).toMatchObject({
      approved: c.decision.approve,
      decided_by: 'local',
      decided_at: decided.body.decided_at,
      reason: c.decision.reason ?? null,
    });
    if (c.status === 'failed') {
      expect((await taskOf(b, taskId)).error).toContain('the outcome of edit_file was unknown');
      expect(after.requests).toHaveLength(0);
    } else if (!c.decision.approve) {
      expect(after.toolMessages(0).call_append).toContain('edit_file was not run again');
    }
  });
});
