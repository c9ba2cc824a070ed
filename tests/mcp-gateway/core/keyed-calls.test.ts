import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RefusalCode } from '../../../mcp-gateway/contract.ts';
import { keyedCall } from '../../../mcp-gateway/core/keyed-calls.ts';
import { Refusal } from '../../../mcp-gateway/refusals.ts';
import type { CallKeyQueries } from '../../../mcp-gateway/store/call-keys.ts';
import { createToolServerApp } from '../../../tool-server/app.ts';
import { createCallRecord } from '../../../tool-server/call-record.ts';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import { nativeTools } from '../../../tool-server/tools/native.ts';
import { startMcpHttpServer, text } from '../../helpers/mcp-http-server.ts';
import { log, makeStack, openSecurity, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Exactly-once for keyed calls at the gateway (issue 32 item 7), on SQLite and (the postgres project) on
// PostgreSQL, where the record is the one every replica shares: a key runs once and its repeat gets the
// recorded outcome, a repeat while it runs is told so, and a call under a task's fence lower than the highest
// seen is refused before it runs. Each is shown by the file's bytes.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** An append-style edit: each run puts `line` before END, so the file shows how many times it ran. */
const append = (line: string) => ({
  path: 'ledger.txt',
  edits: [{ old_text: 'END', new_text: `${line}\nEND` }],
});

async function ledgerStack() {
  const s = await makeStack({ toolsets: SPLIT_TOOLSETS });
  stack = s;
  await writeFile(path.join(s.root, 'ledger.txt'), 'END');
  const on = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
    session_id: 's1',
    action: 'ACTIVATE',
    toolset_ids: ['fs_write'],
  });
  expect(on.status).toBe(200);
  const ledger = () => readFile(path.join(s.root, 'ledger.txt'), 'utf8');
  const callEdit = (line: string, extra: Record<string, unknown> = {}) =>
    s.post(s.gatewayApp, '/mcp/tools/edit_file/call', {
      session_id: 's1',
      arguments: append(line),
      ...extra,
    });
  return { s, ledger, callEdit };
}

describe('keyed tool calls at the gateway', () => {
  it('runs a key once: its repeat gets the recorded outcome and the file is edited once', async () => {
    const { s, ledger, callEdit } = await ledgerStack();
    const first = await callEdit('one', { idempotency_key: 'task-1:1:1:0:call_a' });
    expect(first.status).toBe(200);
    expect(first.body.success).toBe(true);
    const repeat = await callEdit('one', { idempotency_key: 'task-1:1:1:0:call_a' });
    expect(repeat.status).toBe(200);
    expect(repeat.body).toEqual(first.body);
    expect(await ledger()).toBe('one\nEND');
    // Answered from the gateway's own record: the backend was called once (each backend call is audited).
    await s.gatewayStore.flush();
    const calls = (await s.gatewayStore.listAudit({ session_id: 's1', kind: 'call', limit: 100 })).audit;
    expect(calls.filter((r) => r.subject === 'edit_file')).toHaveLength(1);
    // Another key is another call: it runs (and without a key, every call runs).
    expect((await callEdit('two', { idempotency_key: 'task-1:1:1:1:call_b' })).body.success).toBe(true);
    expect((await callEdit('three')).body.success).toBe(true);
    expect((await callEdit('three')).body.success).toBe(true);
    expect(await ledger()).toBe('one\ntwo\nthree\nthree\nEND');
  });

  it('says a key is still running (and runs nothing) while its first call has not ended', async () => {
    const { s, ledger, callEdit } = await ledgerStack();
    // Another replica began this key and has not finished it (the shared record says so).
    await s.callKeys.begin({
      key: 'task-2:1:1:0:call_a',
      session_id: 's1',
      tool: 'edit_file',
      task_id: 'task-2',
      fence: 1,
      at: Date.now(),
    });
    const repeat = await callEdit('one', { idempotency_key: 'task-2:1:1:0:call_a' });
    expect(repeat.status).toBe(409);
    expect(repeat.body).toMatchObject({ code: 'in_progress', retry_after_s: 1 });
    expect(await ledger()).toBe('END');
    // Once it ends, the repeat gets its outcome: still nothing runs here.
    const outcome = { success: true, result: { from: 'the other replica' }, execution_time_ms: 1 };
    await s.callKeys.finish('task-2:1:1:0:call_a', JSON.stringify({ result: outcome }), Date.now());
    const after = await callEdit('one', { idempotency_key: 'task-2:1:1:0:call_a' });
    expect(after.body).toEqual(outcome);
    expect(await ledger()).toBe('END');
    // A key names one call: used for another tool or session it is refused.
    const other = await s.post(s.gatewayApp, '/mcp/tools/write_file/call', {
      session_id: 's1',
      arguments: { path: 'other.txt', content: 'x' },
      idempotency_key: 'task-2:1:1:0:call_a',
    });
    expect(other.body).toMatchObject({ code: 'conflict' });
  });

  it('refuses a call sent under a lower fence than the task’s highest, before it runs', async () => {
    const { s, ledger, callEdit } = await ledgerStack();
    const fence = (n: number) => ({ task_id: 'task-3', fence: n });
    expect((await callEdit('under-2', { idempotency_key: 'k2', fence: fence(2) })).body.success).toBe(true);
    // A frozen worker's request, sent under the lease it held before the task passed on.
    const late = await callEdit('under-1', { idempotency_key: 'k1', fence: fence(1) });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ code: 'fenced', fence: 2 });
    expect(await ledger()).toBe('under-2\nEND');
    // The worker taking the task over announces its fence first: the one before it is refused from then on.
    const announced = await s.post(s.gatewayApp, '/mcp/tasks/task-3/fence', { fence: 4 });
    expect(announced).toMatchObject({ status: 200, body: { task_id: 'task-3', fence: 4 } });
    expect((await callEdit('under-3', { idempotency_key: 'k3', fence: fence(3) })).body.code).toBe('fenced');
    expect((await s.post(s.gatewayApp, '/mcp/tasks/task-3/fence', { fence: 3 })).body.code).toBe('fenced');
    expect((await callEdit('under-4', { idempotency_key: 'k4', fence: fence(4) })).body.success).toBe(true);
    expect(await ledger()).toBe('under-2\nunder-4\nEND');
    // The refused key was never begun: sent again under the current fence, it runs.
    expect((await callEdit('retried', { idempotency_key: 'k3', fence: fence(4) })).body.success).toBe(true);
    expect(await ledger()).toBe('under-2\nunder-4\nretried\nEND');
  });

  it('frees a key refused before it ran (an approval to ask), so the approved call runs under it', async () => {
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      policy: 'default: allow\nrules:\n  - { tool: edit_file, decision: ask, reason: edits need a yes }\n',
    });
    const s = stack;
    await writeFile(path.join(s.root, 'ledger.txt'), 'END');
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      session_id: 's1',
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
    });
    const body = { session_id: 's1', arguments: append('approved'), idempotency_key: 'task-4:1:1:0:c' };
    const asked = await s.post(s.gatewayApp, '/mcp/tools/edit_file/call', body);
    expect(asked.body.code).toBe('approval_needed');
    await s.gateway.decideApproval(asked.body.approval.id, true, 'operator');
    const ran = await s.post(s.gatewayApp, '/mcp/tools/edit_file/call', body);
    expect(ran.body.success).toBe(true);
    expect(await readFile(path.join(s.root, 'ledger.txt'), 'utf8')).toBe('approved\nEND');
  });

  it('answers a call that ran even when its outcome cannot be recorded; its repeat is told it is running', async () => {
    const { s, ledger } = await ledgerStack();
    const keys = s.callKeys;
    const failing: CallKeyQueries = {
      ...keys,
      finish: async () => {
        throw new Error('the database is unreachable');
      },
    };
    const heard: unknown[] = [];
    const ran = () => Promise.resolve({ success: true, result: 'ran', execution_time_ms: 1 });
    const refuse = (code: RefusalCode, message: string) => new Refusal(code, message);
    const call = { idempotency_key: 'task-7:1:1:0:c', session_id: 's1', tool: 'edit_file' };
    const result = await keyedCall(
      failing,
      call,
      refuse,
      async () => {},
      ran,
      (err) => heard.push(err),
    );
    expect(result).toMatchObject({ success: true, result: 'ran' });
    expect(String(heard[0])).toMatch(/unreachable/);
    await expect(keyedCall(keys, call, refuse, async () => {}, ran)).rejects.toMatchObject({
      code: 'in_progress',
    });
    expect(await ledger()).toBe('END');
  });

  it('reports a tool-server answer lost on the way as an unknown outcome; asked again, the tool-server’s record answers', async () => {
    let lose = true;
    stack = await makeStack({
      toolsets: SPLIT_TOOLSETS,
      interceptToolServer: async (request, next) => {
        const res = await next();
        if (!request.url.endsWith('/tools/edit_file') || !lose) return res;
        lose = false;
        await res.text();
        throw new TypeError('fetch failed: other side closed');
      },
    });
    const s = stack;
    await writeFile(path.join(s.root, 'ledger.txt'), 'END');
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      session_id: 's1',
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
    });
    const body = { session_id: 's1', arguments: append('one'), idempotency_key: 'task-8:1:1:0:c' };
    const lost = await s.post(s.gatewayApp, '/mcp/tools/edit_file/call', body);
    expect(lost.status).toBe(502);
    expect(lost.body).toMatchObject({ code: 'upstream_failed', outcome: 'unknown' });
    expect(await readFile(path.join(s.root, 'ledger.txt'), 'utf8')).toBe('one\nEND');
    const again = await s.post(s.gatewayApp, '/mcp/tools/edit_file/call', body);
    expect(again.status).toBe(200);
    expect(again.body.success).toBe(true);
    expect(await readFile(path.join(s.root, 'ledger.txt'), 'utf8')).toBe('one\nEND');
    // An unkeyed call's lost answer is a plain failure, as before.
    lose = true;
    const unkeyed = await s.post(s.gatewayApp, '/mcp/tools/edit_file/call', {
      session_id: 's1',
      arguments: append('two'),
    });
    expect(unkeyed.body.code).toBe('upstream_failed');
    expect(unkeyed.body.outcome).toBeUndefined();
  });

  it('prunes keys and fences older than the cut-off', async () => {
    const { s, callEdit } = await ledgerStack();
    await callEdit('one', { idempotency_key: 'old', fence: { task_id: 'task-5', fence: 7 } });
    expect(await s.callKeys.prune(Date.now() + 1000, 100)).toBe(2);
    // Forgotten: the key runs again, and the task's fence starts over.
    expect(
      (await callEdit('two', { idempotency_key: 'old', fence: { task_id: 'task-5', fence: 1 } })).body
        .success,
    ).toBe(true);
  });
});

describe('keyed tool calls to an upstream MCP server', () => {
  it('pass the key on in _meta, and run once at the gateway whatever the server does with it', async () => {
    const seen: (Record<string, unknown> | null)[] = [];
    const server = await startMcpHttpServer({
      tools: [
        {
          definition: { name: 'bump', description: 'Counts a call', inputSchema: { type: 'object' } },
          run: (_args, { meta }) => {
            seen.push(meta);
            return text(`call ${seen.length}`);
          },
        },
      ],
    });
    try {
      stack = await makeStack({
        toolsets: {
          'counter.yaml': `id: counter\ndescription: Counts.\nbackend:\n  mcp:\n    url: ${server.url}\n`,
        },
      });
      const s = stack;
      await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
        session_id: 's1',
        action: 'ACTIVATE',
        toolset_ids: ['counter'],
      });
      const body = { session_id: 's1', arguments: {}, idempotency_key: 'task-6:1:1:0:c' };
      const first = await s.post(s.gatewayApp, '/mcp/tools/bump/call', body);
      const again = await s.post(s.gatewayApp, '/mcp/tools/bump/call', body);
      expect(first.body.success).toBe(true);
      expect(again.body).toEqual(first.body);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ 'io.toolshift/idempotency-key': 'task-6:1:1:0:c' });
    } finally {
      await server.close();
    }
  });
});

describe('keyed tool calls at the tool-server', () => {
  it('runs a key once: a repeat, while it runs or after, gets the first outcome', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'keys-'));
    try {
      await writeFile(path.join(root, 'ledger.txt'), 'END');
      const app = createToolServerApp({
        registry: createRegistry(nativeTools),
        context: { paths: await PathGuard.create({ roots: [root], readOnlyRoots: [] }), maxReadBytes: 1024 },
        log,
        security: openSecurity,
        calls: createCallRecord({ max: 2 }),
      });
      const send = (line: string, key?: string) =>
        app.request('/tools/edit_file', {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
          body: JSON.stringify(append(line)),
        });
      const [a, b] = await Promise.all([send('one', 'k1'), send('one', 'k1')]);
      expect(await a.json()).toEqual(await b.json());
      expect((await (await send('one', 'k1')).json()).success).toBe(true);
      expect(await readFile(path.join(root, 'ledger.txt'), 'utf8')).toBe('one\nEND');
      // Bounded: two keys kept, the oldest goes first.
      await send('two', 'k2');
      await send('three', 'k3');
      await send('one', 'k1');
      expect(await readFile(path.join(root, 'ledger.txt'), 'utf8')).toBe('one\ntwo\nthree\none\nEND');
      const bad = await send('x', 'with space');
      expect(bad.status).toBe(400);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
