import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockModel } from '../../bench/mock-model.ts';
import { freePort } from '../helpers/chaos-stack.ts';
import { daemonCli, runnersOf } from '../helpers/cli.ts';
import { startDaemon } from '../helpers/daemon.ts';
import { startMcpHttpServer } from '../helpers/mcp-http-server.ts';

// Each person's own API key at an upstream (a toolset's user_secrets), on a real daemon (`npm start`): a person
// sets theirs with the CLI, and their calls reach the upstream with it, never another's; a person with none is
// told how to set theirs; the value is sealed on disk and never in an answer.

const ACCOUNTS: Record<string, string> = {
  'Bearer alice-secret-at-upstream-0001': 'alice@upstream',
  'Bearer bob-secret-at-upstream-0002': 'bob@upstream',
};

let tmp: string;
let data: string;
let daemon: ReturnType<typeof startDaemon>;
let model: Awaited<ReturnType<typeof startMockModel>>;
let upstream: Awaited<ReturnType<typeof startMcpHttpServer>>;
let urls: Record<'agent-server' | 'mcp-gateway' | 'tool-server', string>;
const keys: Record<string, string> = {};
let cli: ReturnType<typeof daemonCli>;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'own-secrets-'));
  data = path.join(tmp, 'data');
  cli = daemonCli({ data, home: tmp });
  const ws = path.join(tmp, 'ws');
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
      {
        definition: { name: 'echo_key', description: 'A careless service', inputSchema: { type: 'object' } },
        run: (_args, seen) => ({
          content: [{ type: 'text', text: `your header was ${seen.authorization}` }],
        }),
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
  model = await startMockModel({ script: (key) => ({ answer: `done ${key}` }) });
  daemon = startDaemon({
    // A port known before it starts: the gateway's links to the console name it.
    AGENT_PORT: String(await freePort()),
    TOOLSHIFT_DATA_DIR: data,
    FS_ROOTS: ws,
    HOME: tmp,
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'test',
  });
  urls = await daemon.listening;
  Object.assign(keys, await runnersOf(cli, ['alice', 'bob']));
}, 90_000);

afterAll(async () => {
  daemon?.child.kill('SIGTERM');
  await daemon?.exited;
  await upstream?.close();
  await model?.close();
  await rm(tmp, { recursive: true, force: true });
});

/** An MCP client of /mcp with `key`, the keyed toolset activated. */
async function clientOf(key: string) {
  const client = new Client({ name: 'test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${urls['mcp-gateway']}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

const textOf = (r: Awaited<ReturnType<Client['callTool']>>) =>
  (r.content as { type: string; text?: string }[]).map((c) => c.text ?? '').join('');

describe("a person's own secrets", () => {
  it('tells a person with none of their own how to set theirs; nobody shares one', async () => {
    const bob = await clientOf(keys.bob);
    const activated = await bob.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['keyed'] },
    });
    expect(textOf(activated)).toContain('needs your own KEYED_TOKEN');
    expect(textOf(activated)).toContain('toolshift secrets set keyed KEYED_TOKEN');
    expect(textOf(activated)).toContain(`${urls['agent-server']}/console/connect/keyed`);
    await bob.close();
    // What is missing, for him and (for a task of his) the agent.
    const mine = await fetch(`${urls['mcp-gateway']}/mcp/me/connections`, {
      headers: { authorization: `Bearer ${keys.bob}` },
    });
    expect((await mine.json()).connections).toEqual([
      {
        toolset: 'keyed',
        connected: false,
        missing: ['KEYED_TOKEN'],
        connect_url: `${urls['agent-server']}/console/connect/keyed`,
      },
    ]);
    const bobId = (
      JSON.parse((await cli(['users', 'list', '--json'])).stdout) as { id: string; name: string }[]
    ).find((u) => u.name === 'bob')?.id;
    const agentToken = (await cli(['token', 'agent'])).stdout.trim();
    const forTask = await fetch(`${urls['mcp-gateway']}/mcp/connections/keyed?for_user=user:${bobId}`, {
      headers: { authorization: `Bearer ${agentToken}` },
    });
    expect(await forTask.json()).toMatchObject({ toolset: 'keyed', connected: false });
    // A person's key does not ask about another's.
    const asBob = await fetch(`${urls['mcp-gateway']}/mcp/connections/keyed?for_user=user:${bobId}`, {
      headers: { authorization: `Bearer ${keys.bob}` },
    });
    expect(asBob.status).toBe(403);
    // The console's page to connect it says how to set his with the CLI.
    const login = await fetch(`${urls['agent-server']}/console/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: keys.bob }),
    });
    const cookie = login.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const page = await fetch(`${urls['agent-server']}/console/connect/keyed`, { headers: { cookie } });
    const shown = await page.text();
    expect(page.status).toBe(200);
    expect(shown).toContain('toolshift secrets set keyed KEYED_TOKEN');
    expect(shown).toContain('Still to set: KEYED_TOKEN');
  });

  it("reaches the upstream with each person's own value, never another's", async () => {
    const set = async (who: string, value: string) =>
      cli(['secrets', 'set', 'keyed', 'KEYED_TOKEN'], { AGENT_API_TOKEN: keys[who] }, `${value}\n`);
    expect((await set('alice', 'alice-secret-at-upstream-0001')).code).toBe(0);
    expect((await set('bob', 'bob-secret-at-upstream-0002')).code).toBe(0);
    const seen: Record<string, string> = {};
    for (const who of ['alice', 'bob']) {
      const client = await clientOf(keys[who]);
      const activated = await client.callTool({
        name: 'manage_toolsets',
        arguments: { action: 'ACTIVATE', toolset_ids: ['keyed'] },
      });
      expect(activated.isError, textOf(activated)).toBeFalsy();
      seen[who] = textOf(await client.callTool({ name: 'keyed_whoami', arguments: {} }));
      // A server that echoes the header gives back no value of anyone's.
      const echoed = textOf(await client.callTool({ name: 'keyed_echo_key', arguments: {} }));
      expect(echoed).not.toMatch(/secret-at-upstream/);
      await client.close();
    }
    expect(seen).toEqual({ alice: 'you are alice@upstream', bob: 'you are bob@upstream' });
    const listed = await cli(['secrets', 'list', '--json'], { AGENT_API_TOKEN: keys.alice });
    expect(JSON.parse(listed.stdout)).toEqual([
      { toolset: 'keyed', name: 'KEYED_TOKEN', updated_at: expect.any(String) },
    ]);
    expect(listed.stdout).not.toContain('alice-secret');
  });

  it('keeps every value sealed on disk, and refuses what a person may not set', async () => {
    for (const file of (await readdir(data)).filter((f) => f.startsWith('identity.db'))) {
      const bytes = await readFile(path.join(data, file));
      expect(bytes.includes('alice-secret-at-upstream')).toBe(false);
      expect(bytes.includes('bob-secret-at-upstream')).toBe(false);
    }
    const other = await cli(['secrets', 'set', 'keyed', 'OTHER'], { AGENT_API_TOKEN: keys.alice }, 'x');
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('Toolset keyed takes no secret OTHER of yours: it takes KEYED_TOKEN');
    const typed = await cli(['secrets', 'set', 'keyed', 'KEYED_TOKEN'], { AGENT_API_TOKEN: keys.alice });
    expect(typed.code).toBe(2);
    expect(typed.stderr).toContain('pipe the value in');
    const service = await cli(['secrets', 'list']);
    expect(service.code).toBe(2);
    expect(service.stderr).toContain("secrets are a person's own");
  });

  it('goes back to asking once the person removes theirs', async () => {
    expect(
      (await cli(['secrets', 'remove', 'keyed', 'KEYED_TOKEN'], { AGENT_API_TOKEN: keys.bob })).code,
    ).toBe(0);
    const bob = await clientOf(keys.bob);
    const activated = await bob.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['keyed'] },
    });
    expect(textOf(activated)).toContain('needs your own KEYED_TOKEN');
    // Alice's session had it active: her calls go on with hers.
    const alice = await clientOf(keys.alice);
    await alice.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['keyed'] },
    });
    expect(textOf(await alice.callTool({ name: 'keyed_whoami', arguments: {} }))).toBe(
      'you are alice@upstream',
    );
    await alice.close();
    await bob.close();
  });
});
