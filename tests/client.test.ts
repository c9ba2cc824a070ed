import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../client.ts';
import { answer, call, calls, ScriptedModel } from './helpers/scripted-model.ts';
import { asLoopback, makeStack, SPLIT_TOOLSETS, type Stack } from './helpers/stack.ts';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** Runs the CLI against the in-process stack and captures what it prints. */
async function cli(s: Stack | undefined, ...argv: string[]) {
  return cliWith({}, s, ...argv);
}

/** The CLI with extra environment (tokens). */
async function cliWith(env: Record<string, string>, s: Stack | undefined, ...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    env: { AGENT_URL: 'http://agent', GATEWAY_URL: 'http://gateway', ...env },
    fetch: async (url, init) => {
      if (!s) throw new Error('connect ECONNREFUSED 127.0.0.1:8000');
      const app = url.startsWith('http://agent') ? s.agentApp : s.gatewayApp;
      return app.request(asLoopback(url), init);
    },
  });
  return { code, stdout, stderr };
}

describe('the CLI', () => {
  it('runs a task with live progress, then prints the answer and a one-line summary', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
      calls(call('write_file', { path: 'cli.txt', content: 'from the cli' })),
      answer('Saved cli.txt'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'run', 'save', 'a', 'file');
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(
      /^Saved cli\.txt\n— completed in 3 steps · toolsets used: fs_write · 45 tokens · task task_/,
    );
    expect(out.stderr).toMatch(/step 1: model \(\d+ ms\) → manage_toolsets/);
    expect(out.stderr).toMatch(/activate fs_write: \+3 −0 tools/);
    expect(out.stderr).toMatch(/write_file ok/);
    expect(model.requests[0].messages[1].content).toBe('save a file');
  });

  it('exits non-zero when the task does not complete', async () => {
    const loop = () => calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] }));
    stack = await makeStack({ model: new ScriptedModel([loop, loop]) });
    const out = await cli(stack, 'run', 'spin', '--max-steps', '2');
    expect(out.code).toBe(1);
    expect(out.stdout).toMatch(/— max_steps in 2 steps/);
    expect(out.stderr).toMatch(/error: The task reached max_steps \(2\)/);
  });

  it('lists, activates and deactivates toolsets in a session', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const act = await cli(stack, 'toolsets', 'activate', 'fs_read', '--session', 's1');
    expect(act.code).toBe(0);
    expect(act.stdout).toMatch(
      /session s1: active toolsets: fs_read\nadded tools: read_text_file, list_directory, search_files/,
    );
    const list = await cli(stack, 'toolsets', '--session', 's1');
    expect(list.stdout).toMatch(/fs_read\s+active\s+3 tools\s+Read files/);
    expect(list.stdout).toMatch(/fs_write\s+inactive\s+3 tools/);
    const deact = await cli(stack, 'toolsets', 'deactivate', 'fs_read', '--session', 's1');
    expect(deact.stdout).toMatch(/active toolsets: none\nremoved tools: read_text_file/);
  });

  it('shows tasks and one task’s events', async () => {
    stack = await makeStack({ model: new ScriptedModel([answer('42')]) });
    const ran = await cli(stack, 'run', 'answer');
    const id = /task (task_[\w-]+)/.exec(ran.stdout)?.[1] ?? '';
    const list = await cli(stack, 'tasks');
    expect(list.stdout).toContain(`${id}  completed`);
    const show = await cli(stack, 'tasks', 'show', id);
    expect(show.stdout).toMatch(/goal: answer\n/);
    expect(show.stdout).toMatch(/answer: 42/);
  });

  it('prints server errors and usage errors as one clear line', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const unknown = await cli(stack, 'toolsets', 'activate', 'nope');
    expect(unknown).toMatchObject({ code: 1, stdout: '' });
    expect(unknown.stderr).toBe('error: Unknown toolset id(s): nope. Valid ids: fs_read, fs_write\n');
    const noModel = await cli(stack, 'run', 'x');
    expect(noModel.code).toBe(1);
    expect(noModel.stderr).toMatch(/^error: agent-server answered 503: No model is configured/);
    const missing = await cli(stack, 'tasks', 'show', 'task_missing');
    expect(missing.stderr).toBe('error: No task task_missing; GET /agent/tasks lists recent tasks\n');
    const usage = await cli(stack, 'frobnicate');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/unknown command "frobnicate"/);
    const badFlag = await cli(stack, 'run', 'x', '--max-steps', 'lots');
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/--max-steps must be a positive whole number/);
  });

  it('sends the tokens it has, and names the variable to set when a service answers 401', async () => {
    const tokens = { admin: 'op-secret-1', agent: 'agent-secret-2', user: 'user-secret-3' };
    const model = new ScriptedModel([answer('hello')]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens, model });
    const run = await cli(stack, 'run', 'say hello');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /agent-server answered 401: Missing credentials.*AGENT_API_TOKEN\nSet AGENT_API_TOKEN \(in the environment or \.env\)/,
    );
    const list = await cli(stack, 'toolsets');
    expect(list.code).toBe(1);
    expect(list.stderr).toMatch(/\nSet GATEWAY_ADMIN_TOKEN \(in the environment or \.env\)/);
    expect(model.requests).toHaveLength(0);
    const env = { AGENT_API_TOKEN: tokens.user, GATEWAY_ADMIN_TOKEN: tokens.admin };
    const ok = await cliWith(env, stack, 'run', 'say hello');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^hello\n/);
    expect((await cliWith(env, stack, 'tasks')).stdout).toMatch(/completed/);
    expect((await cliWith(env, stack, 'toolsets', 'disable', 'fs_read')).code).toBe(0);
  });

  it('says when the agent-server cannot be reached', async () => {
    const out = await cli(undefined, 'tasks');
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(
      /^error: Cannot reach http:\/\/agent\/agent\/tasks\?limit=20: connect ECONNREFUSED/,
    );
  });

  it('finds the services from AGENT_PORT and GATEWAY_PORT when no URL is given', async () => {
    const urls: string[] = [];
    const code = await main(['tasks'], {
      stdout: () => {},
      stderr: () => {},
      env: { AGENT_PORT: '18123', GATEWAY_PORT: '18124' },
      fetch: async (url) => {
        urls.push(url);
        return Response.json({ tasks: [] });
      },
    });
    expect(code).toBe(0);
    expect(urls).toEqual(['http://127.0.0.1:18123/agent/tasks?limit=20']);
  });

  it('prints help', async () => {
    const out = await cli(undefined, '--help');
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/toolshift run "<goal>"/);
  });
});
