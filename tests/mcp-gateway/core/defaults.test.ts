import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type FixtureTool, startMcpHttpServer, text } from '../../helpers/mcp-http-server.ts';
import { answer, ScriptedModel } from '../../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../../helpers/stack.ts';

// docs/upstream-servers.md's "Add an MCP server" flow: an upstream toolset made a default (`toolshift toolsets activate X`
// without --session) is offered with its tools to every session that has it — at once in the process that
// made it, and in another process on the same store (a restart, a replica) on the first session that has it —
// and an ACTIVATE of such a toolset answers its tools, not "+0 tokens".

const lookup: FixtureTool = {
  definition: {
    name: 'lookup',
    description: 'Look up an account balance',
    inputSchema: { type: 'object', properties: { account: { type: 'string' } }, required: ['account'] },
  },
  run: (args) => text(`${args.account}: 100 EUR`),
};
const BANK = {
  'bank.yaml':
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the toolset file's own ${VAR}, not a template
    'id: bank\ndescription: Bank accounts.\nvariables: [BANK_URL]\nbackend:\n  mcp:\n    url: ${BANK_URL}\n',
};
const ADMIN = { authorization: 'Bearer admin-token' };
const AGENT = { authorization: 'Bearer agent-token' };

let stacks: Stack[] = [];
let server: Awaited<ReturnType<typeof startMcpHttpServer>> | undefined;
let dataDir: string | undefined;
afterEach(async () => {
  for (const s of stacks) await s.close(true);
  await server?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  stacks = [];
  server = undefined;
  dataDir = undefined;
});

async function bankStack(model?: ScriptedModel) {
  server ??= await startMcpHttpServer({ tools: [lookup] });
  dataDir ??= await mkdtemp(path.join(tmpdir(), 'toolshift-defaults-'));
  const s = await makeStack({
    toolsets: BANK,
    vars: { BANK_URL: server.url },
    tokens: { admin: 'admin-token', agent: 'agent-token' },
    dataDir,
    model,
  });
  stacks.push(s);
  return s;
}

const toolsOf = async (s: Stack, session: string) =>
  (
    (await s.get(s.gatewayApp, `/mcp/tools?session_id=${session}`, AGENT)).body.tools as { name: string }[]
  ).map((t) => t.name);

describe('an upstream toolset made a default', () => {
  it('is started and listed at once: the next task offers the model its tools', async () => {
    const model = new ScriptedModel([answer('100 EUR')]);
    const s = await bankStack(model);
    expect(server?.state.requests).toHaveLength(0); // not started: not a default yet, nobody activated it
    const made = await s.post(
      s.gatewayApp,
      '/mcp/admin/defaults',
      { action: 'ACTIVATE', toolset_ids: ['bank'] },
      ADMIN,
    );
    expect(made.status).toBe(200);
    expect(made.body.default_toolsets).toEqual(['bank']);
    expect(await toolsOf(s, 'a-new-session')).toEqual(['lookup']);
    const task = await s.post(s.agentApp, '/agent/execute_task', { goal: 'what is the balance of acc-1?' });
    expect(task.body.status).toBe('completed');
    expect(model.toolNames()[0]).toContain('lookup');
  });

  it('made by another process on the same store, is listed on the first session that has it', async () => {
    const first = await bankStack();
    await first.post(
      first.gatewayApp,
      '/mcp/admin/defaults',
      { action: 'ACTIVATE', toolset_ids: ['bank'] },
      ADMIN,
    );
    await first.close(true);
    stacks = [];
    // A new process: the default is stored, its server not started here.
    const model = new ScriptedModel([answer('100 EUR')]);
    const second = await bankStack(model);
    const task = await second.post(second.agentApp, '/agent/execute_task', { goal: 'balance of acc-1?' });
    expect(task.body.status).toBe('completed');
    expect(model.toolNames()[0]).toContain('lookup');
  });

  it('answers an ACTIVATE of one not listed yet with its tools and their tokens, not "+0 tokens"', async () => {
    // A file's default whose server was down when the gateway started: active in every session, tools unknown.
    const port = await (async () => {
      const probe = await startMcpHttpServer({ tools: [lookup] });
      const p = Number(new URL(probe.url).port);
      await probe.close();
      return p;
    })();
    dataDir = await mkdtemp(path.join(tmpdir(), 'toolshift-defaults-'));
    const s = await makeStack({
      toolsets: { 'bank.yaml': BANK['bank.yaml'].replace('description:', 'default: true\ndescription:') },
      vars: { BANK_URL: `http://127.0.0.1:${port}/mcp` },
      tokens: { admin: 'admin-token', agent: 'agent-token' },
      dataDir,
    });
    stacks.push(s);
    server = await startMcpHttpServer({ tools: [lookup], port });
    // The connection tries a server that was down again after its back-off (1 s): asked until then.
    const activate = () =>
      s.post(
        s.gatewayApp,
        '/mcp/manage_toolsets',
        { session_id: 'mcp-like', arguments: { action: 'ACTIVATE', toolset_ids: ['bank'] } },
        AGENT,
      );
    const refusals: string[] = [];
    const res = await vi.waitFor(
      async () => {
        const answer = await activate();
        if (answer.status !== 200) refusals.push(answer.body.error);
        expect(answer.status).toBe(200);
        return answer;
      },
      { timeout: 15_000, interval: 100 },
    );
    for (const refusal of refusals) expect(refusal).toMatch(/is down .*the next restart attempt/);
    expect(res.body.result.added_tools).toEqual(['lookup']);
    expect(res.body.result.tool_definition_tokens.change).toBeGreaterThan(0);
    expect(res.body.result.message).toMatch(/New tools: lookup\. Tool definitions: \+\d+ tokens/);
    expect(res.body.tools.map((t: { name: string }) => t.name)).toEqual(['lookup']);
  });

  it('is refused, and not made a default, when its server cannot start', async () => {
    const s = await bankStack();
    await server?.close();
    server = undefined;
    const made = await s.post(
      s.gatewayApp,
      '/mcp/admin/defaults',
      { action: 'ACTIVATE', toolset_ids: ['bank'] },
      ADMIN,
    );
    expect(made.status).toBeGreaterThanOrEqual(400);
    expect(made.body.error).toMatch(/Cannot activate bank/);
    const list = await s.get(s.gatewayApp, '/mcp/admin/toolsets', ADMIN);
    expect(list.body.toolsets.find((t: { id: string }) => t.id === 'bank').default).toBe(false);
  });
});
