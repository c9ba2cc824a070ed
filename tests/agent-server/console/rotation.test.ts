import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import type { Listening } from '../../../lib/http/serve.ts';
import { startStack } from '../../../start/stack.ts';
import { testDatabaseFor } from '../../helpers/stack.ts';

// A console login lasts only as long as the token it was made with, the operator's too: the daemon restarted
// with a rotated token (on the same store, SQLite or PostgreSQL as the run says), an old cookie reads no task,
// runs none and cancels none, and its login is gone for good (it does not come back with the old token).

const OLD = {
  AGENT_API_TOKEN: 'ts_api_rotation-test-old-approver',
  GATEWAY_ADMIN_TOKEN: 'ts_admin_rotation-test-old-operator',
  GATEWAY_AGENT_TOKEN: 'ts_agent_rotation-test-agent',
  VIEWER_TOKEN: 'ts_viewer_rotation-test-old-viewer',
  TOOL_SERVER_TOKEN: 'ts_toolserver_rotation-test',
};

let tmp: string;
let dataDir: string;
let databaseUrl: string | undefined;
let running: Listening[] = [];
let base = '';
/** A model that never answers: a task started against it stays running until cancelled. */
let model: Server;
let modelUrl = '';

async function start(tokens: typeof OLD): Promise<void> {
  for (const s of running) await s.close();
  const config = loadConfig({
    ...tokens,
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSHIFT_DATA_DIR: dataDir,
    FS_ROOTS: path.join(tmp, 'ws'),
    OPENAI_BASE_URL: modelUrl,
    OPENAI_API_KEY: 'sk-test',
    LOG_LEVEL: 'silent',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
  });
  const { tools, gateway, agent } = await startStack(config);
  running = [agent, gateway, tools];
  base = agent.url;
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'console-rotation-'));
  await mkdir(path.join(tmp, 'ws'));
  dataDir = path.join(tmp, 'data');
  databaseUrl = await testDatabaseFor(dataDir);
  model = createServer(() => {
    // never answered
  });
  await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
  modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  for (const s of running) await s.close();
  model.closeAllConnections();
  await new Promise((resolve) => model.close(resolve));
  await rm(tmp, { recursive: true, force: true });
});

async function logIn(token: string) {
  const res = await fetch(`${base}/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0];
  const page = await (await fetch(`${base}/console/`, { headers: { cookie } })).text();
  const csrf = /<meta name="csrf-token" content="([^"]+)"/.exec(page)?.[1] ?? '';
  expect(csrf).not.toBe('');
  return { cookie, csrf, name: cookie.split('=')[0] };
}

type Login = Awaited<ReturnType<typeof logIn>>;

/** A state-changing request of a login, with its CSRF token from the console's own origin. */
const change = (login: Login, url: string, body?: unknown) =>
  fetch(`${base}${url}`, {
    method: 'POST',
    headers: {
      cookie: login.cookie,
      origin: new URL(base).origin,
      'x-csrf-token': login.csrf,
      'content-type': 'application/json',
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Every task, as the API token `token` reads them. */
async function tasks(token: string): Promise<{ task_id: string; status: string }[]> {
  const res = await fetch(`${base}/agent/tasks`, { headers: bearer(token) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { tasks: { task_id: string; status: string }[] }).tasks;
}

describe('a console login after its token is rotated', () => {
  it('is ended for every role: the old cookie reads, runs and cancels nothing, and stays ended', async () => {
    await start(OLD);
    const operator = await logIn(OLD.GATEWAY_ADMIN_TOKEN);
    const approver = await logIn(OLD.AGENT_API_TOKEN);
    const viewer = await logIn(OLD.VIEWER_TOKEN);

    // Every token rotated, on the same store: the operator's is the gateway's alone.
    const NEW = {
      ...OLD,
      AGENT_API_TOKEN: 'ts_api_rotation-test-new-approver',
      GATEWAY_ADMIN_TOKEN: 'ts_admin_rotation-test-new-operator',
      VIEWER_TOKEN: 'ts_viewer_rotation-test-new-viewer',
    };
    await start(NEW);
    const started = await fetch(`${base}/agent/execute_task`, {
      method: 'POST',
      headers: { ...bearer(NEW.AGENT_API_TOKEN), 'content-type': 'application/json' },
      body: JSON.stringify({ goal: 'wait for a model that never answers', wait: false }),
    });
    expect(started.status, await started.clone().text()).toBe(202);
    const { task_id } = (await started.json()) as { task_id: string };
    const before = await tasks(NEW.AGENT_API_TOKEN);
    expect(before.find((t) => t.task_id === task_id)?.status).toBe('running');

    // Cookies are named for the port: the old ones are sent to the new port under its name.
    const port = new URL(base).port;
    const stale = (l: Login): Login => ({
      ...l,
      cookie: l.cookie.replace(l.name, `toolshift_console_${port}`),
    });
    for (const login of [operator, approver, viewer].map(stale)) {
      const page = await fetch(`${base}/console/tasks/${task_id}`, {
        headers: { cookie: login.cookie },
        redirect: 'manual',
      });
      expect(page.status).toBe(303);
      expect(page.headers.get('location')).toBe('/console/login');
      const read = await fetch(`${base}/agent/tasks/${task_id}`, { headers: { cookie: login.cookie } });
      expect(read.status).toBe(401);
      expect((await change(login, `/agent/tasks/${task_id}/cancel`)).status).toBe(401);
      expect(
        (await change(login, '/agent/execute_task', { goal: 'run by a stale login', wait: false })).status,
      ).toBe(401);
    }
    // Nothing was run or cancelled.
    expect(await tasks(NEW.AGENT_API_TOKEN)).toEqual(before);

    // A login made with the token as it is now works, the operator's too: it reads the task and cancels it.
    const current = await logIn(NEW.GATEWAY_ADMIN_TOKEN);
    const read = await fetch(`${base}/agent/tasks/${task_id}`, { headers: { cookie: current.cookie } });
    expect(read.status).toBe(200);
    expect((await change(current, `/agent/tasks/${task_id}/cancel`)).status).toBe(200);
    expect((await tasks(NEW.AGENT_API_TOKEN)).find((t) => t.task_id === task_id)?.status).toBe('cancelled');
    for (const token of [NEW.VIEWER_TOKEN, NEW.AGENT_API_TOKEN]) {
      const { cookie } = await logIn(token);
      expect((await fetch(`${base}/agent/tasks`, { headers: { cookie } })).status).toBe(200);
    }

    // A gateway that cannot be asked lets the operator's login neither in nor ends it: 503, then back in once
    // the gateway is (on a new port: the cookie follows it).
    await running[1].close();
    const unreachable = await fetch(`${base}/agent/tasks`, { headers: { cookie: current.cookie } });
    expect(unreachable.status).toBe(503);
    expect(((await unreachable.json()) as { error: string }).error).toMatch(/gateway .* could not be asked/);
    running.splice(1, 1);
    await start(NEW);
    const again = current.cookie.replace(current.name, `toolshift_console_${new URL(base).port}`);
    expect((await fetch(`${base}/agent/tasks`, { headers: { cookie: again } })).status).toBe(200);

    // The old logins were ended, not just refused: back on the old tokens, the old cookies still open nothing.
    await start(OLD);
    const oldPort = new URL(base).port;
    for (const login of [operator, approver, viewer]) {
      const cookie = login.cookie.replace(login.name, `toolshift_console_${oldPort}`);
      expect((await fetch(`${base}/agent/tasks`, { headers: { cookie } })).status).toBe(401);
    }
  });
});
