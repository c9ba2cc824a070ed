import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, expect, it } from 'vitest';
import { startMockModel } from '../../../bench/mock-model.ts';
import { bearerOf, storedToken } from '../../helpers/credentials.ts';
import { startDaemon } from '../../helpers/daemon.ts';

// A task's webhook survives the process: the daemon is killed (SIGKILL) while its POST is out and unanswered,
// and once started again it delivers it, with the same id and the secret kept in the credentials file.

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

it('delivers a webhook once after a kill -9 that came before any receiver took it', {
  timeout: 90_000,
}, async () => {
  const tmp = await mkdtemp(path.join(tmpdir(), 'webhook-restart-'));
  dirs.push(tmp);
  const data = path.join(tmp, 'data');
  const ws = path.join(tmp, 'ws');
  await mkdir(ws, { recursive: true });
  const model = await startMockModel({ script: () => ({ answer: 'survived' }) });
  // The first POST is held unanswered (the daemon dies meanwhile); later ones are taken.
  const received: { headers: IncomingHttpHeaders; body: string; answered: boolean }[] = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answered = received.length > 0;
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered });
      if (answered) res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const env = {
    TOOLSHIFT_DATA_DIR: data,
    FS_ROOTS: ws,
    HOME: tmp,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test',
    AGENT_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
    AGENT_WEBHOOK_TIMEOUT_S: '1',
  };
  const first = startDaemon(env);
  let second: ReturnType<typeof startDaemon> | undefined;
  try {
    const agent = (await first.listening)['agent-server'];
    const headers = { 'content-type': 'application/json', ...bearerOf(data, 'AGENT_API_TOKEN') };
    const res = await fetch(`${agent}/agent/execute_task`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ goal: 'answer', webhook: { url } }),
    });
    const task = (await res.json()) as { task_id: string; status: string };
    expect(task.status).toBe('completed');
    await expect.poll(() => received.length, { timeout: 10_000 }).toBe(1);
    first.child.kill('SIGKILL');
    await first.exited;

    second = startDaemon(env);
    const again = (await second.listening)['agent-server'];
    await expect
      .poll(
        async () => {
          const detail = (await (
            await fetch(`${again}/agent/tasks/${task.task_id}`, { headers })
          ).json()) as {
            webhooks?: { status: string }[];
          };
          return detail.webhooks?.map((w) => w.status);
        },
        { timeout: 30_000, interval: 200 },
      )
      .toEqual(['delivered']);
    // Taken once, sent under the one id it was recorded with, signed with the secret kept on disk.
    expect(received.filter((r) => r.answered)).toHaveLength(1);
    expect(new Set(received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const secret = storedToken(data, 'AGENT_WEBHOOK_SECRET');
    expect(secret).toMatch(/^whsec_/);
    const body = new Webhook(secret).verify(received[1].body, received[1].headers as Record<string, string>);
    expect(body).toMatchObject({
      type: 'task.finished',
      data: { task_id: task.task_id, final_answer: 'survived' },
    });
  } finally {
    if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill('SIGKILL');
    await second?.stop();
    receiver.closeAllConnections();
    receiver.close();
    await model.close();
  }
});
