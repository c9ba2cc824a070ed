import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { goalMarker, startMockModel } from '../../bench/mock-model.ts';
import { freePort } from '../helpers/chaos-stack.ts';
import { daemonCli, runnersOf } from '../helpers/cli.ts';
import { startDaemon } from '../helpers/daemon.ts';
import { startMcpHttpServer } from '../helpers/mcp-http-server.ts';

// A task that needs a person's own account waits for them, on a real daemon (`npm start`): the gateway refuses
// the task's activation of a toolset whose user_secrets its owner has not set (consent_required); the task waits
// (awaiting_consent, with the console's link) and goes on with the upstream's real answer once they set theirs
// with the CLI — also across a restart of the daemon; it can be cancelled while it waits, and fails once
// CONSENT_TIMEOUT_S passes.

const ACCOUNTS: Record<string, string> = {
  'Bearer carol-secret-at-upstream-0001': 'carol@upstream',
  'Bearer dave-secret-at-upstream-0002': 'dave@upstream',
};

let tmp: string;
let data: string;
let ws: string;
let env: Record<string, string>;
let daemon: ReturnType<typeof startDaemon>;
let model: Awaited<ReturnType<typeof startMockModel>>;
let upstream: Awaited<ReturnType<typeof startMcpHttpServer>>;
let urls: Record<'agent-server' | 'mcp-gateway' | 'tool-server', string>;
const keys: Record<string, string> = {};
let cli: ReturnType<typeof daemonCli>;

const as = (who: string) => ({ AGENT_API_TOKEN: keys[who] });

/** The daemon on the test's data, waited for until it listens. */
async function start(more: Record<string, string> = {}) {
  daemon = startDaemon({ ...env, ...more });
  urls = await daemon.listening;
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'consent-'));
  data = path.join(tmp, 'data');
  cli = daemonCli({ data, home: tmp });
  ws = path.join(tmp, 'ws');
  await mkdir(path.join(data, 'toolsets'), { recursive: true });
  await mkdir(ws, { recursive: true });
  upstream = await startMcpHttpServer({
    tools: [
      {
        definition: { name: 'whoami', description: 'Who the service sees', inputSchema: { type: 'object' } },
        run: (_args, seen) => {
          const account = ACCOUNTS[seen.authorization ?? ''];
          return account
            ? { content: [{ type: 'text', text: `you are ${account}` }] }
            : { isError: true, content: [{ type: 'text', text: 'unauthorized' }] };
        },
      },
    ],
  });
  await writeFile(
    path.join(data, 'toolsets', 'keyed.yaml'),
    [
      'id: keyed',
      'description: A service each person reaches with their own API key',
      'backend:',
      '  mcp:',
      `    url: ${upstream.url}`,
      '    headers:',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the toolset file's own ${VAR}, not a template
      '      Authorization: Bearer ${KEYED_TOKEN}',
      'variables: [KEYED_TOKEN]',
      'user_secrets: [KEYED_TOKEN]',
      'prefix: keyed_',
      'pin: false',
      '',
    ].join('\n'),
  );
  // Each task activates the keyed toolset, asks the service who it is, and answers.
  model = await startMockModel({
    record: true,
    script: (key, turn) =>
      [
        {
          calls: [
            {
              id: 'c_on',
              name: 'manage_toolsets',
              arguments: { action: 'ACTIVATE', toolset_ids: ['keyed'] },
            },
          ],
        },
        { calls: [{ id: 'c_who', name: 'keyed_whoami', arguments: {} }] },
        { answer: `done ${key}` },
      ][turn],
  });
  env = {
    // A port known before it starts: the gateway's links to the console name it, across restarts too.
    AGENT_PORT: String(await freePort()),
    TOOLSHIFT_DATA_DIR: data,
    FS_ROOTS: ws,
    HOME: tmp,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test',
  };
  await start();
  Object.assign(keys, await runnersOf(cli, ['carol', 'dave', 'erin']));
}, 90_000);

afterAll(async () => {
  await daemon?.stop();
  await upstream?.close();
  await model?.close();
  await rm(tmp, { recursive: true, force: true });
});

/** The task as its owner reads it. */
async function taskOf(who: string, taskId: string) {
  const res = await fetch(`${urls['agent-server']}/agent/tasks/${taskId}`, {
    headers: { authorization: `Bearer ${keys[who]}` },
  });
  return (await res.json()) as {
    status: string;
    final_answer: string | null;
    error: string | null;
    events: { type: string; data: Record<string, unknown> }[];
  };
}

async function until(who: string, taskId: string, status: string) {
  await expect.poll(async () => (await taskOf(who, taskId)).status, { timeout: 20_000 }).toBe(status);
  return taskOf(who, taskId);
}

/** The one task `who` has, once it is listed. */
async function onlyTask(who: string): Promise<string> {
  let id = '';
  await expect
    .poll(async () => {
      const listed = JSON.parse((await cli(['tasks', 'list', '--json'], as(who))).stdout) as {
        task_id: string;
      }[];
      id = listed[0]?.task_id ?? '';
      return listed.length;
    })
    .toBe(1);
  return id;
}

const setSecret = (who: string) =>
  cli(
    ['secrets', 'set', 'keyed', 'KEYED_TOKEN'],
    as(who),
    `${who}-secret-at-upstream-000${who === 'carol' ? 1 : 2}\n`,
  );

/** What the model was sent in the last request of the task marked `key`. */
const lastRequestOf = (key: string) => model.requests.filter((r) => r.key === key).at(-1)?.body ?? '';

describe('a task waiting for its owner to connect their account', () => {
  it('waits with the link, shows it in the CLI, and goes on with the real answer once the owner connects', async () => {
    const link = `${urls['agent-server']}/console/connect/keyed`;
    const running = cli(['run', `${goalMarker('carol')} who am I at the service?`], as('carol'));
    const taskId = await onlyTask('carol');
    const waiting = await until('carol', taskId, 'awaiting_consent');
    expect(waiting.events.find((e) => e.type === 'consent_required')?.data).toEqual({
      step: 1,
      tool_call_id: 'c_on',
      toolset: 'keyed',
      connect_url: link,
    });
    expect((await cli(['tasks', 'list'], as('carol'))).stdout).toMatch(
      new RegExp(`${taskId}\\s+awaiting_consent`),
    );
    expect((await setSecret('carol')).code).toBe(0);
    const ran = await running;
    expect(ran.code).toBe(0);
    expect(ran.stderr).toContain(`waiting for you to connect your own account for keyed: ${link}`);
    expect(ran.stdout).toContain('done carol');
    // The model got the service's real answer, and nothing of the wait.
    expect(lastRequestOf('carol')).toContain('you are carol@upstream');
    expect(lastRequestOf('carol')).not.toMatch(/consent|KEYED_TOKEN/);
    const watched = await cli(['tasks', 'watch', taskId], as('carol'));
    expect(watched.stderr).toContain(`waiting for you to connect your own account for keyed: ${link}`);
  }, 60_000);

  it('goes on waiting across a restart of the daemon, and resumes once the owner connects', async () => {
    const submitted = await cli(['run', '--detach', `${goalMarker('dave')} who am I?`], as('dave'));
    const taskId = submitted.stdout.trim();
    await until('dave', taskId, 'awaiting_consent');
    await daemon.stop();
    await start();
    const asked = model.requests.filter((r) => r.key === 'dave').length;
    expect((await taskOf('dave', taskId)).status).toBe('awaiting_consent');
    expect((await setSecret('dave')).code).toBe(0);
    const done = await until('dave', taskId, 'completed');
    expect(done.final_answer).toBe('done dave');
    // After the restart the task went on from its activation: the rest of its turns, not its start again.
    expect(model.requests.filter((r) => r.key === 'dave')).toHaveLength(asked + 2);
    expect(lastRequestOf('dave')).toContain('you are dave@upstream');
  }, 90_000);

  it('is cancelled while it waits, and fails once CONSENT_TIMEOUT_S passes', async () => {
    const first = (
      await cli(['run', '--detach', `${goalMarker('erin-1')} who am I?`], as('erin'))
    ).stdout.trim();
    await until('erin', first, 'awaiting_consent');
    expect((await cli(['tasks', 'cancel', first], as('erin'))).code).toBe(0);
    await until('erin', first, 'cancelled');
    await daemon.stop();
    await start({ CONSENT_TIMEOUT_S: '1' });
    const second = (
      await cli(['run', '--detach', `${goalMarker('erin-2')} who am I?`], as('erin'))
    ).stdout.trim();
    const failed = await until('erin', second, 'failed');
    expect(failed.error).toMatch(
      /did not connect their own account for toolset keyed before .* \(CONSENT_TIMEOUT_S\); they connect it at http/,
    );
  }, 90_000);
});
