import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack, type StackOptions } from '../../helpers/stack.ts';

// Fencing reaches effects, not only rows (issue 32 item 7), on both stores. A worker stops while its edit is
// still on the way to the gateway (held here, as a frozen process's queued request is); the next worker takes
// the task over, announces its fence to the gateway, and asks a human. The stale request arrives while the
// human decides: the gateway refuses it for its lower fence, and after "run again" the edit happened once.

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
const append = call(
  'edit_file',
  { path: 'count.txt', edits: [{ old_text: 'x', new_text: 'xy' }] },
  'call_append',
);

/**
 * Keeps the first edit_file request from reaching the gateway: its sender gives up (its task is stopped) and
 * the request stays queued until the test delivers it. Returns the gateway's answer to it then.
 */
function queueFirstEdit() {
  let stale: { path: string; init: RequestInit } | undefined;
  let queued: () => void = () => {};
  const isQueued = new Promise<void>((r) => {
    queued = r;
  });
  const sent: { fence?: number }[] = [];
  const intercept: NonNullable<StackOptions['interceptGateway']> = async (req, next) => {
    const url = new URL(req.url);
    if (!/\/mcp\/tools\/edit_file\/call$/.test(url.pathname)) return next();
    const body = await req.clone().text();
    sent.push(JSON.parse(body).fence);
    if (stale) return next();
    stale = { path: url.pathname, init: { method: 'POST', headers: req.headers, body } };
    queued();
    return new Promise((_, reject) => {
      req.signal.addEventListener('abort', () => reject(req.signal.reason), { once: true });
    });
  };
  /** Delivers the queued request to `app`, the gateway (the shared one) as it is now. */
  const deliver = (app: Stack['gatewayApp']) => {
    if (!stale) throw new Error('no request was queued');
    return app.request(stale.path, stale.init);
  };
  return { intercept, isQueued, sent, deliver };
}

const backends = [
  { name: 'SQLite', database: async () => undefined },
  { name: 'PostgreSQL', database: () => freshDatabase('fenced') },
];

describe.each(backends)('a request of a worker that lost its task, on $name', (backend) => {
  it('is refused by the gateway once the next worker took the task over, so "run again" edits once', async () => {
    const databaseUrl = await backend.database();
    const queue = queueFirstEdit();
    const a = await makeStack({
      model: new ScriptedModel([calls(activate), calls(append)]),
      toolsets: FILE_TOOLS,
      databaseUrl,
      interceptGateway: queue.intercept,
    });
    await mkdir(a.root, { recursive: true });
    const onDisk = () => readFile(path.join(a.root, 'count.txt'), 'utf8');
    await writeFile(path.join(a.root, 'count.txt'), 'x');
    const submitted = await a.post(a.agentApp, '/agent/execute_task', { goal: 'count', wait: false });
    const taskId = submitted.body.task_id as string;
    await queue.isQueued;
    await a.close(true);

    const after = new ScriptedModel([answer('done')]);
    const b = await makeStack({
      model: after,
      toolsets: FILE_TOOLS,
      dataDir: a.dataDir,
      paths: await PathGuard.create({ roots: [a.root], readOnlyRoots: [] }),
      databaseUrl,
      interceptGateway: queue.intercept,
    });
    stacks.push(b);
    const taskOf = async () => (await b.get(b.agentApp, `/agent/tasks/${taskId}`)).body;
    await expect.poll(async () => (await taskOf()).status, { timeout: 10_000 }).toBe('awaiting_approval');
    // The stale request arrives while the human decides: refused for its fence, nothing happens on disk.
    const late = await queue.deliver(b.gatewayApp);
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({ code: 'fenced' });
    expect(await onDisk()).toBe('x');
    // "Run again": the edit runs, once.
    const decided = await b.post(b.agentApp, `/agent/tasks/${taskId}/approvals/call_append`, {
      approve: true,
    });
    expect(decided.status).toBe(200);
    await expect.poll(async () => (await taskOf()).status, { timeout: 10_000 }).toBe('completed');
    expect(await onDisk()).toBe('xy');
    // Arriving again later, it is still refused.
    expect((await queue.deliver(b.gatewayApp)).status).toBe(409);
    expect(await onDisk()).toBe('xy');
    expect(queue.sent).toHaveLength(2);
    const [stale, rerun] = queue.sent as { fence: number }[];
    expect(rerun.fence).toBeGreaterThan(stale.fence);
  });
});
