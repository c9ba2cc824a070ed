import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockModel } from '../../bench/mock-model.ts';
import { type CliIo, main } from '../../client.ts';
import { storedToken } from '../helpers/credentials.ts';
import { startDaemon } from '../helpers/daemon.ts';

// People on a real daemon (`npm start`'s start/start.ts): the operator makes users, teams and keys with the CLI;
// each user acts with their own key on the agent's API and the MCP face, sees only their own work, and is held
// to their team's limits, counted in the database; a revoked key and a removed user's key are refused.

let tmp: string;
let data: string;
let daemon: ReturnType<typeof startDaemon>;
let model: Awaited<ReturnType<typeof startMockModel>>;
let urls: Record<'agent-server' | 'mcp-gateway' | 'tool-server', string>;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'teams-'));
  data = path.join(tmp, 'data');
  const ws = path.join(tmp, 'ws');
  await mkdir(ws, { recursive: true });
  model = await startMockModel({ script: (key) => ({ answer: `done ${key}` }) });
  daemon = startDaemon({
    TOOLSHIFT_DATA_DIR: data,
    FS_ROOTS: ws,
    HOME: tmp,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test',
  });
  urls = await daemon.listening;
}, 60_000);

afterAll(async () => {
  daemon?.child.kill('SIGTERM');
  await daemon?.exited;
  await model?.close();
  await rm(tmp, { recursive: true, force: true });
});

/** The CLI as the operator runs it on the daemon's machine (its stored admin token). */
async function cli(...argv: string[]) {
  const out = { stdout: '', stderr: '' };
  const io: CliIo = {
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
    env: { TOOLSHIFT_DATA_DIR: data, HOME: tmp },
  };
  const code = await main(argv, io);
  return { code, ...out };
}

const as = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

async function run(key: string, goal: string) {
  const res = await fetch(`${urls['agent-server']}/agent/execute_task`, {
    method: 'POST',
    headers: as(key),
    body: JSON.stringify({ goal }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

describe('teams on a running daemon', () => {
  const keys: Record<string, string> = {};

  it('the operator makes a team, users in it and their keys; a key is printed once', async () => {
    expect((await cli('teams', 'add', 'eng', '--tasks-per-hour', '3')).code).toBe(0);
    for (const name of ['alice', 'bob']) {
      const added = await cli('users', 'add', name, '--team', 'eng', '--email', `${name}@example.org`);
      expect(added.code, added.stderr).toBe(0);
    }
    expect((await cli('users', 'add', 'olga')).code).toBe(0);
    for (const [name, role] of [
      ['alice', 'runner'],
      ['bob', 'runner'],
      ['olga', 'operator'],
    ]) {
      const made = await cli('keys', 'create', '--user', name, '--role', role, '--json');
      expect(made.code, made.stderr).toBe(0);
      keys[name] = JSON.parse(made.stdout).key;
    }
    const listed = await cli('keys', 'list');
    expect(listed.stdout).toMatch(/alice\s+runner/);
    for (const key of Object.values(keys)) expect(listed.stdout).not.toContain(key);
    const users = await cli('users', 'list');
    expect(users.stdout).toMatch(/alice\s+eng/);
    expect((await cli('teams', 'list')).stdout).toMatch(
      /eng\s+members: alice, bob; limits: tasks-per-hour 3/,
    );
    // The team's ceiling, from the CLI (lifted again: the tests below use the tools).
    const ceiling = await cli('teams', 'disable', 'eng', 'web_tools', 'git_tools');
    expect(ceiling.stdout).toBe('team eng may not use: git_tools, web_tools\n');
    expect((await cli('teams', 'list')).stdout).toMatch(/may not use: git_tools, web_tools/);
    expect((await cli('teams', 'enable', 'eng', 'web_tools', 'git_tools')).stdout).toMatch(
      /nothing disabled/,
    );
    // The team's policy overlay from a file, and taken away.
    const file = path.join(tmp, 'eng-policy.yaml');
    await writeFile(file, 'rules:\n  - { tool: write_file, decision: ask }\n');
    expect((await cli('teams', 'policy', 'eng', file)).stdout).toBe(`team eng's policy set from ${file}\n`);
    expect((await cli('teams', 'policy', 'eng', 'none')).stdout).toBe('team eng has no policy of its own\n');
    // Bad input says what is valid.
    const bad = await cli('keys', 'create', '--user', 'alice', '--role', 'boss');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/viewer, runner, approver or operator/);
    const never = await cli('keys', 'create', '--user', 'alice', '--role', 'runner', '--expires', '0d');
    expect(never.code).toBe(1);
    expect(never.stderr).toMatch(/expires_in is a whole number \(1 or more\)/);
  });

  it("each user runs tasks with their own key and sees only their own; the operator's key sees all", async () => {
    const a = await run(keys.alice, 'alice asks');
    expect(a.status).toBe(200);
    expect(a.body.status).toBe('completed');
    const b = await run(keys.bob, 'bob asks');
    expect(b.body.status).toBe('completed');
    const get = (key: string, p: string) => fetch(`${urls['agent-server']}${p}`, { headers: as(key) });
    expect((await get(keys.alice, `/agent/tasks/${a.body.task_id}`)).status).toBe(200);
    // Another user's task and thread are not there (the same 404 as an id that never existed).
    const foreign = await get(keys.bob, `/agent/tasks/${a.body.task_id}`);
    expect(foreign.status).toBe(404);
    const never = await get(keys.bob, '/agent/tasks/task_neverexisted');
    expect((await foreign.json()).error).toBe(
      ((await never.json()).error as string).replace('task_neverexisted', a.body.task_id),
    );
    expect((await get(keys.bob, `/agent/threads/${a.body.thread_id}`)).status).toBe(404);
    const bobs = (await (await get(keys.bob, '/agent/tasks')).json()).tasks.map((t: any) => t.task_id);
    expect(bobs).toEqual([b.body.task_id]);
    const threads = (await (await get(keys.bob, '/agent/threads')).json()).threads.map(
      (t: any) => t.thread_id,
    );
    expect(threads).toEqual([b.body.thread_id]);
    // Nor act in Bob's thread's session by naming it for a new thread of hers.
    const squat = await fetch(`${urls['agent-server']}/agent/execute_task`, {
      method: 'POST',
      headers: as(keys.alice),
      body: JSON.stringify({ goal: 'squat', session_id: b.body.session_id }),
    });
    expect(squat.status).toBe(409);
    expect((await squat.json()).error).toMatch(/is not one of your threads' sessions/);
    // Alice's key cannot go on in Bob's thread either.
    const into = await fetch(`${urls['agent-server']}/agent/execute_task`, {
      method: 'POST',
      headers: as(keys.alice),
      body: JSON.stringify({ goal: 'sneak in', thread_id: b.body.thread_id }),
    });
    expect(into.status).toBe(404);
    const all = (await (await get(keys.olga, '/agent/tasks')).json()).tasks.map((t: any) => t.task_id);
    expect(all).toEqual(expect.arrayContaining([a.body.task_id, b.body.task_id]));
  });

  it("a team's limit holds for its members together: past it, 429 with Retry-After and whose limit", async () => {
    // alice 1 and bob 1 so far (the task refused for a foreign thread was not counted): the fourth is refused.
    const third = await run(keys.alice, 'alice again');
    expect(third.body.status).toBe('completed');
    const past = await run(keys.bob, 'bob again');
    expect(past.status).toBe(429);
    expect(Number(past.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(past.body.error).toMatch(/^team eng reached the limit tasks_per_hour \(3\); it resets in \d+ s$/);
    expect(past.body).toMatchObject({ code: 'limit_reached', limit: 'tasks_per_hour', subject: 'team eng' });
    // The operator, in no team, is not held by it.
    expect((await run(keys.olga, 'olga runs')).body.status).toBe('completed');
  });

  it('a user logs in to the console with their key and sees their own tasks there', async () => {
    const base = urls['agent-server'];
    const login = await fetch(`${base}/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: base, 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ token: keys.bob }),
    });
    expect(login.status, await login.clone().text()).toBe(200);
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
    const page = async (p: string) => {
      const res = await fetch(`${base}${p}`, { headers: { cookie }, redirect: 'manual' });
      return { status: res.status, text: await res.text() };
    };
    const tasks = await page('/console/tasks');
    expect(tasks.status).toBe(200);
    expect(tasks.text).toContain('bob asks');
    expect(tasks.text).not.toContain('alice asks');
    const mine = (await (await fetch(`${base}/agent/tasks`, { headers: as(keys.bob) })).json()).tasks;
    expect((await page(`/console/tasks/${mine[0].task_id}`)).status).toBe(200);
    const all = (await (await fetch(`${base}/agent/tasks`, { headers: as(keys.olga) })).json()).tasks;
    const hers = all.find((t: any) => t.goal === 'alice asks');
    expect((await page(`/console/tasks/${hers.task_id}`)).status).toBe(404);
    const bad = await fetch(`${base}/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: base, 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ token: `${keys.bob.slice(0, 15)}${'x'.repeat(43)}` }),
    });
    expect(bad.status).toBe(401);
  });

  it("a user's key reaches the MCP face; the admin routes stay the operator's", async () => {
    const client = new Client({ name: 'alice-client', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${urls['mcp-gateway']}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${keys.alice}` } },
    });
    await client.connect(transport);
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThan(0);
    const activated = await client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] },
    });
    expect(activated.isError, JSON.stringify(activated.content)).toBeFalsy();
    await client.close();
    // Her change is in her audit, named as hers; Bob's key finds none of it, the operator's finds it.
    const audit = async (key: string) =>
      (await (await fetch(`${urls['mcp-gateway']}/mcp/admin/audit`, { headers: as(key) })).json()).audit as {
        actor: string;
        kind: string;
        for_user: string | null;
      }[];
    const hers = (await audit(keys.alice)).filter((r) => r.kind === 'activate');
    expect(hers).toEqual([
      expect.objectContaining({
        actor: expect.stringMatching(/^mcp client, user alice \(key [a-z0-9]{10}\)$/),
        for_user: expect.stringMatching(/^user:usr_/),
      }),
    ]);
    expect((await audit(keys.alice)).every((r) => r.for_user === hers[0].for_user)).toBe(true);
    expect((await audit(keys.bob)).some((r) => r.for_user === hers[0].for_user)).toBe(false);
    expect((await audit(keys.olga)).some((r) => r.for_user === hers[0].for_user)).toBe(true);
    const admin = await fetch(`${urls['mcp-gateway']}/mcp/admin/users`, { headers: as(keys.alice) });
    expect(admin.status).toBe(403);
    // The agent's sessions are not read through the gateway with a user's key.
    const session = await fetch(`${urls['mcp-gateway']}/mcp/admin/toolsets?session_id=default`, {
      headers: as(keys.alice),
    });
    expect(session.status).toBe(400);
    expect(
      (await fetch(`${urls['mcp-gateway']}/mcp/admin/toolsets`, { headers: as(keys.alice) })).status,
    ).toBe(200);
    const asOperator = await fetch(`${urls['mcp-gateway']}/mcp/admin/users`, { headers: as(keys.olga) });
    expect(asOperator.status).toBe(200);
    // Counts of everyone's work are the operator's: /metrics refuses a user's key on both services.
    for (const base of [urls['agent-server'], urls['mcp-gateway']]) {
      expect((await fetch(`${base}/metrics`, { headers: as(keys.alice) })).status).toBe(403);
      expect((await fetch(`${base}/metrics`, { headers: as(keys.olga) })).status).toBe(200);
    }
  });

  it('a revoked key and the key of a removed user are refused, saying which', async () => {
    const listed = JSON.parse((await cli('keys', 'list', '--user', 'alice', '--json')).stdout);
    expect((await cli('keys', 'revoke', listed[0].id)).code).toBe(0);
    const revoked = await run(keys.alice, 'after revoke');
    expect(revoked.status).toBe(401);
    expect(revoked.body.error).toMatch(new RegExp(`key ${listed[0].id} was revoked at`));
    expect((await cli('users', 'remove', 'bob')).code).toBe(0);
    const removed = await fetch(`${urls['mcp-gateway']}/mcp`, {
      method: 'POST',
      headers: as(keys.bob),
      body: '{}',
    });
    expect(removed.status).toBe(401);
    expect((await removed.json()).error).toMatch(/belongs to a user who was removed/);
    // A forged key (a known id, another secret) is refused like an unknown one.
    const forged = `${keys.olga.slice(0, 15)}${'x'.repeat(43)}`;
    expect((await run(forged, 'forged')).body.error).toBe('Invalid credentials: no such key');
    // The service token still works for a single-user setup.
    const token = storedToken(data, 'AGENT_API_TOKEN');
    expect((await run(token, 'the token user')).body.status).toBe('completed');
  });
});
