import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import type { Listening } from '../../../lib/http/serve.ts';
import { startGateway } from '../../../mcp-gateway/server.ts';
import { startToolServer } from '../../../tool-server/server.ts';
import { startMcpHttpServer, text } from '../../helpers/mcp-http-server.ts';

// A "billion laughs" YAML file (a few hundred bytes whose aliases expand to 9^9 strings) in each place the
// gateway reads YAML from: the user's toolsets folder, the policy file and the prompts folder. A real gateway
// starts, names each file as that file's error, serves everything else, and fails closed on the policy; a
// reload answers 200 naming them. Proven by the process still answering and its heap staying bounded.

/** Nine levels of nine aliases: 387 million strings once expanded. */
const BOMB = [
  'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
  ...'bcdefghi'
    .split('')
    .map((level, i) => `${level}: &${level} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(', ')}]`),
].join('\n');

const GREETING = `name: greet
description: Greets someone.
arguments:
  - name: who
    description: Whom to greet.
    required: true
template: Hello {{who}}!
`;

let tmp: string;
const running: Listening[] = [];
let upstream: Awaited<ReturnType<typeof startMcpHttpServer>>;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-hostile-'));
  upstream = await startMcpHttpServer({
    tools: [
      {
        definition: { name: 'ping', description: 'Answer pong', inputSchema: { type: 'object' } },
        run: () => text('pong'),
      },
    ],
  });
});

afterAll(async () => {
  for (const s of running.reverse()) await s.close();
  await upstream.close();
  await rm(tmp, { recursive: true, force: true });
});

describe('a YAML alias bomb', () => {
  it('in the toolsets folder, the policy and the prompts: the gateway starts, names each, serves the rest, and reload answers 200', async () => {
    const userDir = path.join(tmp, 'data', 'toolsets');
    const promptsDir = path.join(tmp, 'prompts');
    const policyFile = path.join(tmp, 'policy.yaml');
    await mkdir(userDir, { recursive: true });
    await mkdir(promptsDir);
    await mkdir(path.join(tmp, 'workspace'));
    await writeFile(path.join(userDir, 'bomb.yaml'), `id: bomb\ndescription: Boom.\n${BOMB}\n`);
    await writeFile(
      path.join(userDir, 'pinger.yaml'),
      `id: pinger\ndescription: Answers pong.\nprefix: pinger_\nbackend:\n  mcp:\n    url: ${upstream.url}\n`,
    );
    await writeFile(path.join(promptsDir, 'bomb.yaml'), `${GREETING.replace('greet', 'boom')}${BOMB}\n`);
    await writeFile(path.join(promptsDir, 'greet.yaml'), GREETING);
    await writeFile(policyFile, `default: allow\n${BOMB}\n`);
    const env = {
      AGENT_PORT: '0',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
      TOOLSHIFT_AUTH: 'none',
      FS_ROOTS: path.join(tmp, 'workspace'),
      PROMPTS_DIR: promptsDir,
      POLICY_FILE: policyFile,
      LOG_LEVEL: 'silent',
    };
    const heapBefore = process.memoryUsage().heapUsed;
    const tools = await startToolServer(loadConfig(env));
    running.push(tools);
    const gateway = await startGateway(loadConfig({ ...env, TOOL_SERVER_URL: tools.url }));
    running.push(gateway);
    const api = async (route: string, body?: unknown) => {
      const res = await fetch(`${gateway.url}${route}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };

    // The other toolsets and prompts are served; the bombs are not.
    const ids = (await api('/mcp/admin/toolsets')).body.toolsets.map((t: { id: string }) => t.id);
    expect(ids).toEqual(expect.arrayContaining(['pinger', 'file_system_tools', 'memory']));
    expect(ids).not.toContain('bomb');
    const prompts = (await api('/mcp/prompts')).body.prompts.map((p: { name: string }) => p.name);
    expect(prompts).toEqual(['greet']);

    // The policy did not load: the gateway fails closed, saying why, until the file is fixed.
    const policy = (await api('/mcp/admin/policy')).body;
    expect(policy).toMatchObject({ file: policyFile, default: 'deny', rules: [] });
    expect(policy.error).toMatch(/policy\.yaml: its aliases \(\*name\) expand to more than 100 nodes/);
    const denied = await api('/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['pinger'],
      session_id: 's',
    });
    expect(denied.status).toBe(403);
    expect(denied.body.error).toContain('the policy file does not load, so everything is denied');

    // Fixed, and reloaded: 200, the policy in force, each bomb named as its file's error.
    await writeFile(policyFile, 'default: allow\n');
    const fixed = await api('/mcp/admin/reload', {});
    expect(fixed.status).toBe(200);
    expect(fixed.body.warnings).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /prompts\/bomb\.yaml: its aliases .* \(this file is skipped; the other prompts load\)$/,
        ),
        expect.stringMatching(
          /toolsets\/bomb\.yaml: its aliases .* \(this file is skipped; the other toolsets load\)$/,
        ),
      ]),
    );
    expect((await api('/mcp/admin/policy')).body).toEqual({ file: policyFile, default: 'allow', rules: [] });
    const on = await api('/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['pinger'],
      session_id: 's',
    });
    expect(on.body.added_tools).toEqual(['pinger_ping']);

    // The bomb back in the policy: the reload still answers 200, names it, and the running policy stays.
    await writeFile(policyFile, `default: allow\n${BOMB}\n`);
    const again = await api('/mcp/admin/reload', {});
    expect(again.status).toBe(200);
    expect(again.body.warnings[0]).toMatch(
      /policy\.yaml: its aliases .* \(the running policy stays in force until the file loads\)$/,
    );
    expect((await api('/mcp/admin/policy')).body).toEqual({ file: policyFile, default: 'allow', rules: [] });
    const call = await api('/mcp/tools/pinger_ping/call', { session_id: 's', arguments: {} });
    expect(call.body).toMatchObject({ success: true, result: 'pong' });
    // Expanded, the bomb is gigabytes; bounded, the gateway stays within a small heap of where it began.
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(256 * 1024 * 1024);
  });
});
