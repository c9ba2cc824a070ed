import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { delay, HttpResponse, http } from 'msw';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentServer } from '../../agent-server/server.ts';
import { type Config, loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { completion, MODEL_BASE_URL, modelEdge } from '../helpers/msw.ts';
import { runOnPty } from '../helpers/pty.ts';

// The daemon's agent-server stops while `toolshift run` follows a task on a terminal: the CLI says it lost
// it and reconnects (Last-Event-ID) while it comes back (and the task goes on there), or exits 3 with the
// error on a line of its own.
// Before, the error was glued to the spinner line and the spinner went on forever.

const server = modelEdge();
const BIN = path.resolve('bin/toolshift.js');
const ESC = String.fromCharCode(27);
let tmp: string;
let config: Config;
let others: Listening[] = [];

/** Goals whose model call never answers (the agent aborts it when it stops). */
const stalled = new Set<string>();

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-reconnect-'));
  await mkdir(path.join(tmp, 'workspace'));
  config = loadConfig({
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: MODEL_BASE_URL,
    OPENAI_API_KEY: 'test-key',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    TOOLSHIFT_AUTH: 'none',
    FS_ROOTS: path.join(tmp, 'workspace'),
    LOG_LEVEL: 'silent',
  });
  const tools = await startToolServer(config);
  config.tools.url = tools.url;
  const gateway = await startGateway(config);
  config.gateway.url = gateway.url;
  others = [gateway, tools];
  server.use(
    http.post(`${MODEL_BASE_URL}/chat/completions`, async ({ request }) => {
      const body = (await request.json()) as { messages: { content: string }[] };
      if (stalled.has(body.messages[1].content)) await delay('infinite');
      return HttpResponse.json(completion({ content: 'done' }));
    }),
  );
});

afterAll(async () => {
  server.close();
  for (const s of others) await s.close();
  await rm(tmp, { recursive: true, force: true });
});

/** An agent-server of its own (its own database), on a port it can come back to. */
async function agentOn(name: string, port = 0): Promise<Listening> {
  const c = structuredClone(config);
  c.agent.port = port;
  c.dataDir = path.join(tmp, name);
  return startAgentServer(c);
}

const envFor = (agentUrl: string, reconnectS: string) => ({
  PATH: process.env.PATH,
  HOME: tmp,
  TERM: 'xterm-256color',
  TOOLSHIFT_AUTH: 'none',
  AGENT_URL: agentUrl,
  GATEWAY_URL: config.gateway.url,
  TOOLSHIFT_RECONNECT_S: reconnectS,
});

describe('toolshift run when the daemon stops mid-task', () => {
  it.concurrent('reconnects while it comes back, then shows how the task ended', async () => {
    stalled.add('wait for the model a');
    let agent = await agentOn('a');
    const port = Number(new URL(agent.url).port);
    const p = runOnPty(process.execPath, [BIN, 'run', 'wait for the model a'], envFor(agent.url, '60'));
    await p.waitFor(/thinking…/);
    await agent.close();
    await p.waitFor(
      /lost the agent-server at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\); reconnecting for up to 60s…/,
    );
    // The task went back to the queue with the process that ran it: the new one goes on with it, and this
    // time the model answers.
    stalled.delete('wait for the model a');
    agent = await agentOn('a', port);
    try {
      expect(await p.exited).toBe(0);
    } finally {
      await agent.close();
    }
    const out = p.output();
    expect(out).toMatch(/reconnected; following task task_[0-9a-f-]+ again/);
    expect(out).toContain('done');
  });

  it.concurrent('exits 3 with the error on a line of its own when it does not come back', async () => {
    stalled.add('wait for the model b');
    const agent = await agentOn('b');
    const p = runOnPty(process.execPath, [BIN, 'run', 'wait for the model b'], envFor(agent.url, '1'));
    await p.waitFor(/thinking…/);
    await agent.close();
    expect(await p.exited).toBe(3);
    const out = p.output();
    // The spinner line is cleared before the error, which starts a line; then how to follow the task again.
    expect(out).toMatch(
      new RegExp(
        `\\r${ESC}\\[Kerror: cannot reach the agent-server at http://127\\.0\\.0\\.1:\\d+ \\(ECONNREFUSED\\)[^\\r]*\\r\\n` +
          ' {2}task (task_[0-9a-f-]+) keeps its state on the server; once toolshift is back: toolshift tasks watch \\1\\r\\n$',
      ),
    );
    expect(out).toContain('reconnecting for up to 1s…');
  });
});
