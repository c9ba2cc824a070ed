import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { TaskDetail } from '../../../agent-server/contract.ts';
import type { TaskOutcome } from '../../../agent-server/store/interface.ts';
import { createPostgresTaskStore } from '../../../agent-server/store/store.ts';
import { type Deliverer, startDeliverer } from '../../../agent-server/webhooks/deliver.ts';
import { webhookGuard } from '../../../agent-server/webhooks/guard.ts';
import { finishedMessage } from '../../../agent-server/webhooks/message.ts';
import { openPostgres } from '../../../lib/db/postgres.ts';
import { freshDatabase } from '../../helpers/postgres.ts';
import { answer, call, calls, ScriptedModel } from '../../helpers/scripted-model.ts';
import { log, makeStack, SPLIT_TOOLSETS, type Stack } from '../../helpers/stack.ts';

// Tasks' webhooks end to end in one process: a task names a URL, its end (or its wait for a human) is POSTed
// from the store to a real receiver that verifies the Standard Webhooks signature with the secret; a receiver
// that fails is retried, one that never answers is given up; a URL the guard refuses is a 400.

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver on loopback answering each POST with the next status of `statuses` (then 200). */
async function receiver(statuses: number[] = []) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(statuses.shift() ?? 200, { 'content-type': 'text/plain' });
      res.end('receiver says hello');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return { url, received };
}

/** Verifies a POST as any Standard Webhooks receiver does; its JSON body. */
function verified(r: Received): any {
  return new Webhook(SECRET).verify(r.body, r.headers as Record<string, string>);
}

const servers: Server[] = [];
let stack: Stack | undefined;
let deliverer: Deliverer | undefined;
afterEach(async () => {
  await deliverer?.stop();
  deliverer = undefined;
  await stack?.close();
  stack = undefined;
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

/** A stack whose tasks may POST to loopback (AGENT_WEBHOOK_ALLOW_HOSTS=127.0.0.1), and its deliverer. */
async function hooked(
  model: ScriptedModel,
  extra: Parameters<typeof makeStack>[0] = {},
  maxAgeMs = 60_000,
  guard = webhookGuard(['127.0.0.1']),
) {
  stack = await makeStack({ model, webhooks: guard, toolsets: SPLIT_TOOLSETS, ...extra });
  deliverer = startDeliverer({
    store: stack.taskStore,
    secret: SECRET,
    guard,
    timeoutMs: 2000,
    maxAgeMs,
    log,
    pollMs: 20,
    firstRetryMs: 20,
  });
  return stack;
}

async function deliveries(s: Stack, taskId: string) {
  return TaskDetail.parse((await s.get(s.agentApp, `/agent/tasks/${taskId}`)).body).webhooks ?? [];
}

describe('webhooks', () => {
  it('POSTs a task’s end once, signed, with its outcome; the task shows it delivered', async () => {
    const hook = await receiver();
    const s = await hooked(new ScriptedModel([answer('forty-two')]));
    const res = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'answer',
      webhook: { url: hook.url },
    });
    expect(res.body.status).toBe('completed');
    await expect.poll(() => hook.received.length).toBe(1);
    const [post] = hook.received;
    expect(post.headers['content-type']).toBe('application/json');
    expect(post.headers['webhook-id']).toMatch(/^msg_/);
    expect(Number(post.headers['webhook-timestamp'])).toBeCloseTo(Date.now() / 1000, -2);
    expect(post.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(verified(post)).toEqual({
      type: 'task.finished',
      timestamp: expect.any(String),
      data: {
        task_id: res.body.task_id,
        thread_id: res.body.thread_id,
        status: 'completed',
        final_answer: 'forty-two',
        error: null,
        steps: 1,
        usage: expect.objectContaining({ total_tokens: expect.any(Number) }),
        pending_approval: null,
      },
    });
    // Another secret does not verify it.
    expect(() =>
      new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(post.body, post.headers as never),
    ).toThrow();
    await expect.poll(async () => (await deliveries(s, res.body.task_id))[0]?.status).toBe('delivered');
    expect(await deliveries(s, res.body.task_id)).toEqual([
      expect.objectContaining({ id: post.headers['webhook-id'], kind: 'task.finished', attempts: 1 }),
    ]);
    expect(hook.received).toHaveLength(1);
  });

  it('POSTs a wait for a human with what it waits for', async () => {
    const hook = await receiver();
    const s = await hooked(
      new ScriptedModel([
        calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
        calls(call('write_file', { path: 'a.txt', content: 'x' }, 'call_write')),
        answer('written'),
      ]),
      { policy: 'rules:\n  - { tool: write_file, decision: ask }\n' },
    );
    const res = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'write a.txt',
      wait: false,
      webhook: { url: hook.url },
    });
    await expect.poll(() => hook.received.length).toBe(1);
    expect(verified(hook.received[0])).toMatchObject({
      type: 'task.waiting',
      data: {
        task_id: res.body.task_id,
        status: 'awaiting_approval',
        pending_approval: { call_id: 'call_write', kind: 'call', subject: 'write_file' },
      },
    });
  });

  it('retries a receiver that fails: delivered on the third attempt, with the same id', async () => {
    const hook = await receiver([500, 503]);
    const s = await hooked(new ScriptedModel([answer('ok')]));
    const res = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'answer',
      webhook: { url: hook.url },
    });
    await expect.poll(async () => (await deliveries(s, res.body.task_id))[0]?.status).toBe('delivered');
    expect(hook.received).toHaveLength(3);
    expect(new Set(hook.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const r of hook.received) expect(verified(r).type).toBe('task.finished');
    expect((await deliveries(s, res.body.task_id))[0]).toMatchObject({ attempts: 3, last_error: null });
  });

  it('gives up on a receiver that cannot be reached, and says why', async () => {
    const gone = await receiver();
    servers.pop()?.close();
    const s = await hooked(new ScriptedModel([answer('ok')]), {}, 300);
    const res = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'answer',
      webhook: { url: gone.url },
    });
    await expect
      .poll(async () => (await deliveries(s, res.body.task_id))[0]?.status, { timeout: 5000 })
      .toBe('failed');
    const [failed] = await deliveries(s, res.body.task_id);
    expect(failed.attempts).toBeGreaterThan(1);
    expect(failed.last_error).toMatch(/ECONNREFUSED|connection refused/i);
  });

  it('a thread’s webhook gets each of its tasks’ ends; a task naming its own overrides it; the guard checks it', async () => {
    const hook = await receiver();
    const other = await receiver();
    const s = await hooked(new ScriptedModel([answer('first'), answer('second')]));
    const refused = await s.post(s.agentApp, '/agent/threads', {
      webhook: { url: 'http://169.254.169.254/hook' },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toContain('169.254.169.254');
    const made = await s.post(s.agentApp, '/agent/threads', { webhook: { url: hook.url } });
    expect(made.body.webhook).toEqual({ url: hook.url });
    const one = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'one',
      thread_id: made.body.thread_id,
    });
    const two = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'two',
      thread_id: made.body.thread_id,
      webhook: { url: other.url },
    });
    await expect.poll(() => hook.received.length + other.received.length).toBe(2);
    expect(verified(hook.received[0]).data).toMatchObject({
      task_id: one.body.task_id,
      thread_id: made.body.thread_id,
    });
    expect(verified(other.received[0]).data).toMatchObject({
      task_id: two.body.task_id,
      final_answer: 'second',
    });
  });

  it('refuses a webhook that is not http(s), or whose host the guard refuses, naming why', async () => {
    const s = await hooked(new ScriptedModel([]));
    const post = (url: string) => s.post(s.agentApp, '/agent/execute_task', { goal: 'x', webhook: { url } });
    const ftp = await post('ftp://example.com/hook');
    expect(ftp.status).toBe(400);
    expect(ftp.body.error).toMatch(/webhook\.url.*http or https/);
    const privateHost = await post('http://10.1.2.3/hook');
    expect(privateHost.status).toBe(400);
    expect(privateHost.body.error).toMatch(/a private address.*AGENT_WEBHOOK_ALLOW_HOSTS/);
    const metadata = await post('http://169.254.169.254/latest');
    expect(metadata.body.error).toMatch(/link-local/);
    const extra = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'x',
      webhook: { url: 'https://example.com/', secret: 'x' },
    });
    expect(extra.status).toBe(400);
    // With no secret to sign with, no webhook is taken at all.
    await deliverer?.stop();
    deliverer = undefined;
    await s.close();
    stack = await makeStack({ model: new ScriptedModel([]) });
    const unsigned = await stack.post(stack.agentApp, '/agent/execute_task', {
      goal: 'x',
      webhook: { url: 'https://example.com/hook' },
    });
    expect(unsigned.status).toBe(400);
    expect(unsigned.body.error).toMatch(/AGENT_WEBHOOK_SECRET/);
  });

  it('checks the address again when it connects: a name that turns private is refused then', async () => {
    const hook = await receiver();
    const port = new URL(hook.url).port;
    // A rebinding DNS: public when the task is submitted, loopback (where the receiver is) afterwards.
    let rebinds = 0;
    const resolve = async (host: string) => {
      if (host === 'internal.test') return [{ address: '10.0.0.5', family: 4 }];
      return [{ address: rebinds++ === 0 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
    };
    const s = await hooked(new ScriptedModel([answer('ok')]), {}, 300, webhookGuard([], resolve));
    const internal = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'x',
      webhook: { url: 'http://internal.test/hook' },
    });
    expect(internal.status).toBe(400);
    expect(internal.body.error).toMatch(/internal\.test: it resolves to 10\.0\.0\.5, a private address/);
    const res = await s.post(s.agentApp, '/agent/execute_task', {
      goal: 'answer',
      webhook: { url: `http://rebind.test:${port}/hooks` },
    });
    expect(res.body.status).toBe('completed');
    await expect
      .poll(async () => (await deliveries(s, res.body.task_id))[0]?.status, { timeout: 5000 })
      .toBe('failed');
    expect((await deliveries(s, res.body.task_id))[0].last_error).toMatch(
      /rebind\.test: it resolves to 127\.0\.0\.1, a loopback address/,
    );
    expect(hook.received).toEqual([]);
  });
});

describe('webhooks with two workers on one PostgreSQL', () => {
  it('POSTs each delivery once, whichever worker claims it', async () => {
    const url = await freshDatabase('hooks');
    const stores = await Promise.all(
      ['a', 'b'].map((holder) => createPostgresTaskStore(openPostgres(url, 'test', { max: 4 }), { holder })),
    );
    const hook = await receiver();
    const guard = webhookGuard(['127.0.0.1']);
    // Both look every few milliseconds, and both hear of every POST recorded: each race for every row.
    const claimed = [0, 0];
    const workers = stores.map((store, i) =>
      startDeliverer({
        store: {
          ...store,
          claimWebhooks: async (limit, leaseMs) => {
            const due = await store.claimWebhooks(limit, leaseMs);
            claimed[i] += due.length;
            return due;
          },
        },
        secret: SECRET,
        guard,
        timeoutMs: 2000,
        maxAgeMs: 60_000,
        log,
        pollMs: 5,
      }),
    );
    try {
      const outcome: TaskOutcome = {
        status: 'completed',
        final_answer: 'ok',
        error: null,
        steps: 1,
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        toolsets_used: [],
        tokens: null as unknown as TaskOutcome['tokens'],
      };
      const ids = Array.from({ length: 30 }, (_, i) => `task_${i}`);
      for (const [i, id] of ids.entries()) {
        const store = stores[i % 2];
        await store.createTask(id, 'ses', 'goal');
        await store.finishTask(
          id,
          outcome,
          finishedMessage({ taskId: id, webhook: { url: hook.url } }, outcome),
        );
      }
      await expect
        .poll(async () => {
          const rows = await Promise.all(ids.map((id) => stores[0].webhookDeliveries(id)));
          return rows.flat().filter((r) => r.status === 'delivered' && r.attempts === 1).length;
        })
        .toBe(ids.length);
      expect(hook.received).toHaveLength(ids.length);
      // Both took part; neither took a row the other had.
      expect(claimed[0]).toBeGreaterThan(0);
      expect(claimed[1]).toBeGreaterThan(0);
      expect(claimed[0] + claimed[1]).toBe(ids.length);
      const tasks = hook.received.map((r) => verified(r).data.task_id as string);
      expect(tasks.sort()).toEqual([...ids].sort());
    } finally {
      for (const w of workers) await w.stop();
      for (const store of stores) await store.close();
    }
  });
});
