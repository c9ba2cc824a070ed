import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { answer, call, calls, ScriptedModel, type Step } from '../../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// A lost answer is an unknown outcome, not a failure (issue 32 item 7), on SQLite and (the postgres project)
// on PostgreSQL. Between the agent and the gateway sits what the test owns: it forwards a tool call, lets the
// gateway run it, and then loses the answer (a balancer's 502, a reset). A call that is not safe to repeat
// waits for a human as `unknown_outcome`, the model told nothing of a failure; a read-only one is asked
// again with the same key and answered once.

const stacks: Stack[] = [];
afterEach(async () => {
  for (const s of stacks.splice(0)) await s.close();
});

/** What the agent sent to the gateway's call route, in order. */
interface Sent {
  tool: string;
  body: { idempotency_key?: string; fence?: { task_id: string; fence: number } };
}

/**
 * A stack whose gateway answers of tool calls are lost as `lose` says (by the call's order): 'reset' throws as
 * a broken connection does, '502' answers as a balancer whose replica died; the gateway has run the call.
 */
async function lossyStack(
  model: ScriptedModel,
  lose: (n: number, tool: string) => 'reset' | '502' | 'backend' | undefined,
) {
  const sent: Sent[] = [];
  let edits = 0;
  const s = await makeStack({
    model,
    toolsets: SPLIT_TOOLSETS,
    // 'backend': the gateway's request to the tool-server loses its answer (the tool ran).
    interceptToolServer: async (request, next) => {
      const res = await next();
      if (!request.url.endsWith('/tools/edit_file') || lose(++edits, 'edit_file') !== 'backend') return res;
      await res.text();
      throw new TypeError('fetch failed: other side closed');
    },
    interceptGateway: async (request, next) => {
      const tool = /\/mcp\/tools\/([^/]+)\/call$/.exec(new URL(request.url).pathname)?.[1];
      if (!tool) return next();
      sent.push({ tool, body: await request.clone().json() });
      const res = await next();
      const text = await res.text();
      const how = lose(sent.length, tool);
      if (how === 'reset') throw new TypeError('fetch failed: socket hang up');
      if (how === '502') return new Response('<html>502 Bad Gateway</html>', { status: 502 });
      return new Response(text, { status: res.status, headers: res.headers });
    },
  });
  stacks.push(s);
  await writeFile(path.join(s.root, 'ledger.txt'), 'END');
  return { s, sent, ledger: () => readFile(path.join(s.root, 'ledger.txt'), 'utf8') };
}

async function submit(s: Stack, goal: string) {
  const res = await s.post(s.agentApp, '/agent/execute_task', { goal, wait: false });
  expect(res.status).toBe(202);
  return res.body.task_id as string;
}

async function until(s: Stack, taskId: string, status: string) {
  await expect
    .poll(async () => (await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body.status, { timeout: 10_000 })
    .toBe(status);
  return (await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body;
}

/** A model that appends one line, and — like the model of the chaos run — appends again if told it failed. */
function appender(): Step[] {
  const edit = { path: 'ledger.txt', edits: [{ old_text: 'END', new_text: 'line\nEND' }] };
  return [
    calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
    calls(call('edit_file', edit, 'call_edit')),
    (req) => {
      const said = String(req.messages.at(-1)?.content);
      // A failure makes it try again; being told the edit may have run makes it stop.
      const failed = said.startsWith('Error') && !said.includes('may have taken effect');
      return failed ? calls(call('edit_file', edit, 'call_retry')) : answer(`done: ${said}`);
    },
    (req) => answer(`done after: ${String(req.messages.at(-1)?.content).slice(0, 200)}`),
  ];
}

describe('a lost answer', () => {
  for (const how of ['502', 'reset', 'backend'] as const) {
    it(`of a call not safe to repeat (${how}): the task waits as unknown_outcome, the model is told no failure`, async () => {
      const model = new ScriptedModel(appender());
      const { s, sent, ledger } = await lossyStack(model, (n, tool) =>
        tool === 'edit_file' && n === 1 ? how : undefined,
      );
      const taskId = await submit(s, 'append a line');
      const paused = await until(s, taskId, 'awaiting_approval');
      const needed = paused.events.find((e: { type: string }) => e.type === 'approval_needed');
      expect(needed.data).toMatchObject({
        call_id: 'call_edit',
        kind: 'unknown_outcome',
        subject: 'edit_file',
      });
      expect(needed.data.reason).toMatch(/its answer was lost/);
      // It ran once, was sent once, and no event says it failed.
      expect(await ledger()).toBe('line\nEND');
      expect(sent.filter((c) => c.tool === 'edit_file')).toHaveLength(1);
      expect(
        paused.events.filter(
          (e: { type: string; data: { name?: string } }) =>
            e.type === 'tool_call' && e.data.name === 'edit_file',
        ),
      ).toEqual([]);
      // The key names the task and its lease; the fence is the lease's.
      const { body } = sent[0];
      expect(body.idempotency_key).toMatch(new RegExp(`^${taskId}:\\d+:2:0:call_edit$`));
      expect(body.fence).toEqual({ task_id: taskId, fence: expect.any(Number) });

      // Skipped by the human: the model hears it may have run (not that it failed), and does not append again.
      const decided = await s.post(s.agentApp, `/agent/tasks/${taskId}/approvals/call_edit`, {
        approve: false,
      });
      expect(decided.status).toBe(200);
      const done = await until(s, taskId, 'completed');
      expect(done.final_answer).toMatch(
        /^done: Error: edit_file was not run again\. .* may have taken effect once already/,
      );
      expect(await ledger()).toBe('line\nEND');
      for (const request of model.requests)
        for (const m of request.messages)
          if (m.role === 'tool')
            expect(String(m.content)).not.toMatch(
              /Cannot reach|socket hang up|502|Bad Gateway|failed for edit_file/,
            );
    });
  }

  it('of a read-only call: asked again with the same key, and answered once', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read'] })),
      calls(call('read_text_file', { path: 'ledger.txt' }, 'call_read')),
      (req) => answer(`read: ${String(req.messages.at(-1)?.content)}`),
    ]);
    const { s, sent } = await lossyStack(model, (n, tool) =>
      tool === 'read_text_file' && n === 1 ? '502' : undefined,
    );
    const taskId = await submit(s, 'read the ledger');
    const done = await until(s, taskId, 'completed');
    expect(done.final_answer).toMatch(/^read: .*END/);
    const reads = sent.filter((c) => c.tool === 'read_text_file');
    expect(reads).toHaveLength(2);
    expect(reads[1].body.idempotency_key).toBe(reads[0].body.idempotency_key);
    // The second answer came from the gateway's record: its backend was called once.
    await s.flushWrites();
    const audited = (await s.gatewayStore.listAudit({ kind: 'call', limit: 100 })).audit;
    expect(audited.filter((r) => r.subject === 'read_text_file')).toHaveLength(1);
    const read = done.events.find(
      (e: { type: string; data: { name?: string } }) =>
        e.type === 'tool_call' && e.data.name === 'read_text_file',
    );
    expect(read.data.ok).toBe(true);
  });
});
