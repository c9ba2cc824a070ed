import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelReply } from '../../agent-server/clients/model.ts';
import { main } from '../../client.ts';
import { cliWith } from '../helpers/cli.ts';
import { NO_STORED_CREDENTIALS } from '../helpers/credentials.ts';
import { answer, call, calls, ScriptedModel, type Step } from '../helpers/scripted-model.ts';
import { asLoopback, makeStack, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

// The CLI in-process against the in-process stack, piped (no terminal): what it prints, where, and its exit codes.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** The start of an ANSI escape sequence (colour, cursor movement). */
const ANSI = String.fromCharCode(27);
/** A duration as the CLI prints it: `12 ms` or `1.2s`. */
const DUR = String.raw`(?:\d+ ms|\d+\.\ds)`;

/** Runs the CLI and returns its exit code and output. */
async function cli(s: Stack | undefined, ...argv: string[]) {
  return cliWith({}, s, ...argv);
}

const writeScript = (): Step[] => [
  calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
  calls(call('write_file', { path: 'cli.txt', content: 'from the cli' })),
  answer('Saved cli.txt'),
];

describe('toolshift run, piped', () => {
  it('prints progress lines and a summary on stderr, and only the answer on stdout', async () => {
    const model = new ScriptedModel(writeScript());
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'run', 'save', 'a', 'file');
    expect(out.code).toBe(0);
    expect(out.stdout).toBe('Saved cli.txt\n');
    expect(out.stderr).not.toContain(ANSI);
    const lines = out.stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^task task_[\w-]+ · session ses_[\w-]+ · model test-model$/);
    expect(lines[1]).toMatch(/^step 1 · asking the model · 1 tool \(\d[\d,]* tokens\) · \d+ message tokens$/);
    expect(lines[2]).toMatch(new RegExp(`^step 1 · model ${DUR} → manage_toolsets$`));
    expect(lines[3]).toBe('  ▸ manage_toolsets');
    expect(lines[4]).toMatch(
      /^ {2}✚ activated fs_write: \+3 −0 tools, \+\d[\d,]* tokens \(\d[\d,]* in all\)$/,
    );
    expect(lines[5]).toMatch(/^step 2 · asking the model · 4 tools/);
    expect(lines[7]).toBe('  ▸ write_file');
    expect(lines[8]).toMatch(new RegExp(`^ {2}✓ write_file ${DUR} · \\d+ B$`));
    expect(lines[10]).toMatch(new RegExp(`^step 3 · model ${DUR} → answer$`));
    expect(lines[11]).toMatch(
      new RegExp(
        `^✔ completed in 3 steps · ${DUR} · 45 tokens \\(prompt 30, completion 15\\) · tool definitions [\\d,]+ tokens, ` +
          '[\\d,]+ saved vs all toolsets loaded · toolsets: fs_write$',
      ),
    );
    expect(lines[12]).toMatch(/^ {2}task task_[\w-]+ · session ses_[\w-]+$/);
    expect(lines[13]).toMatch(/^ {2}continue it: toolshift run --thread thr_[\w-]+ "…"$/);
    expect(lines).toHaveLength(14);
    expect(model.requests[0].messages[1].content).toBe('save a file');
  });

  it('shows a run_code script and each call it made, indented beneath it (code mode)', async () => {
    const code =
      "await write_file({ path: 'a.txt', content: 'x' });\nreturn (await read_text_file({ path: 'a.txt' })).content;";
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_read', 'fs_write'] })),
      calls(call('run_code', { code })),
      answer('It says x.'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'run', 'write and read', '--exposure', 'code');
    expect(out.code).toBe(0);
    const lines = out.stderr.trimEnd().split('\n');
    const at = lines.indexOf('  ▸ run_code');
    expect(at).toBeGreaterThan(0);
    expect(lines.slice(at + 1, at + 3)).toEqual([
      "    │ await write_file({ path: 'a.txt', content: 'x' });",
      "    │ return (await read_text_file({ path: 'a.txt' })).content;",
    ]);
    expect(lines[at + 3]).toBe('      ▸ write_file');
    expect(lines[at + 4]).toMatch(new RegExp(`^ {6}✓ write_file ${DUR} · \\d+ B$`));
    expect(lines[at + 5]).toBe('      ▸ read_text_file');
    expect(lines[at + 6]).toMatch(new RegExp(`^ {6}✓ read_text_file ${DUR}`));
    expect(lines[at + 7]).toMatch(new RegExp(`^ {2}✓ run_code ${DUR}`));
    expect(out.stdout).toBe('It says x.\n');
  });

  it('prints every event as a JSON line with --json, then the result', async () => {
    stack = await makeStack({ model: new ScriptedModel(writeScript()), toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'run', 'save a file', '--json');
    expect(out.code).toBe(0);
    expect(out.stderr).toBe('');
    const records = out.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(records.map((r) => r.type)).toEqual([
      'task_started',
      'model_request',
      'model_call',
      'tool_call_started',
      'toolset_change',
      'model_request',
      'model_call',
      'tool_call_started',
      'tool_call',
      'model_request',
      'model_call',
      'task_finished',
      'result',
    ]);
    expect(records.at(-1)).toMatchObject({ status: 'completed', final_answer: 'Saved cli.txt', steps: 3 });
    expect(records[8].data).toMatchObject({ name: 'write_file', ok: true });
  });

  it('runs the task in the exposure --exposure names, and refuses one it does not know', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['fs_write'] })),
      calls(call('call_tool', { name: 'write_file', arguments: { path: 'cli.txt', content: 'dispatched' } })),
      answer('Saved cli.txt'),
    ]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'run', 'save a file', '--exposure', 'dispatch', '--quiet');
    expect(out.code).toBe(0);
    expect(out.stdout).toBe('Saved cli.txt\n');
    // Every request offered the same two tools, and the write went through the dispatcher.
    expect(model.toolNames()).toEqual([
      ['manage_toolsets', 'call_tool'],
      ['manage_toolsets', 'call_tool'],
      ['manage_toolsets', 'call_tool'],
    ]);
    expect(await readFile(path.join(stack.root, 'cli.txt'), 'utf8')).toBe('dispatched');
    const bad = await cli(stack, 'run', 'save a file', '--exposure', 'cached');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--exposure must be auto .*, native .*, dispatch .* or code .*, got "cached"/);
  });

  it('prints only the answer with --quiet, reads the goal from stdin with run -, and detaches with --detach', async () => {
    const model = new ScriptedModel([answer('forty-two'), answer('from stdin'), answer('later')]);
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const quiet = await cli(stack, 'run', 'answer', '--quiet');
    expect(quiet).toMatchObject({ code: 0, stdout: 'forty-two\n', stderr: '' });
    const piped = await cliWith({ readStdin: async () => 'a goal\nover two lines\n' }, stack, 'run', '-');
    expect(piped.stdout).toBe('from stdin\n');
    expect(model.requests[1].messages[1].content).toBe('a goal\nover two lines');
    const detached = await cli(stack, 'run', 'go away', '--detach');
    expect(detached.code).toBe(0);
    const id = detached.stdout.trim();
    expect(id).toMatch(/^task_/);
    expect(detached.stderr).toContain(`toolshift tasks watch ${id}`);
    const watched = await cli(stack, 'tasks', 'watch', id, '--quiet');
    expect(watched).toMatchObject({ code: 0, stdout: 'later\n' });
  });

  it('exits 1 when the task does not complete, with the reason on stderr', async () => {
    const loop = () => calls(call('manage_toolsets', { action: 'LIST', toolset_ids: [] }));
    stack = await makeStack({ model: new ScriptedModel([loop, loop]), toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'run', 'spin', '--max-steps', '2');
    expect(out.code).toBe(1);
    expect(out.stdout).toBe('');
    expect(out.stderr).toMatch(/✘ max_steps in 2 steps/);
    expect(out.stderr).toMatch(/ {2}error: The task reached max_steps \(2\)/);
  });

  it('shows model retries as they happen', async () => {
    const model = {
      async complete(_r: unknown, options?: { onRetry?: (r: unknown) => void }): Promise<ModelReply> {
        options?.onRetry?.({
          attempt: 1,
          status: 503,
          reason: 'model endpoint answered 503: overloaded',
          delay_ms: 1500,
        });
        return { ...answer('after a retry'), attempts: 2 };
      },
    };
    stack = await makeStack({ model, toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'run', 'retry');
    expect(out.stderr).toMatch(
      /\n↻ step 1 · model call failed \(HTTP 503\): model endpoint answered 503: overloaded; retrying in 1\.5s \(attempt 2\)\n/,
    );
    expect(out.stderr).toMatch(new RegExp(`step 1 · model ${DUR} after 2 attempts → answer`));
  });
});

describe('toolshift tasks and toolsets', () => {
  it('lists, shows, watches and cancels tasks, as text and as JSON', async () => {
    stack = await makeStack({ model: new ScriptedModel([answer('42')]), toolsets: SPLIT_TOOLSETS });
    const ran = await cli(stack, 'run', 'answer');
    const id = /task (task_[\w-]+)/.exec(ran.stderr)?.[1] ?? '';
    const list = await cli(stack, 'tasks');
    expect(list.stdout).toContain(`${id}  completed`);
    const json = await cli(stack, 'tasks', '--json');
    expect(JSON.parse(json.stdout)[0]).toMatchObject({ task_id: id, status: 'completed' });
    const show = await cli(stack, 'tasks', 'show', id);
    expect(show.stdout).toMatch(/goal: answer\n/);
    expect(show.stdout).toMatch(/answer: 42\n/);
    expect(show.stdout).toMatch(/✔ completed in 1 step/);
    const shown = JSON.parse((await cli(stack, 'tasks', 'show', id, '--json')).stdout);
    expect(shown.events.at(-1).type).toBe('task_finished');
    const replay = await cli(stack, 'tasks', 'watch', id);
    expect(replay).toMatchObject({ code: 0, stdout: '42\n' });
    const cancel = await cli(stack, 'tasks', 'cancel', id);
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toMatch(/is not running \(status: completed\)/);
  });

  it('prints toolsets as JSON', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const out = await cli(stack, 'toolsets', '--json');
    expect(JSON.parse(out.stdout).toolsets.map((t: { id: string }) => t.id)).toEqual(['fs_read', 'fs_write']);
    const act = await cli(stack, 'toolsets', 'activate', 'fs_read', '--session', 's1', '--json');
    expect(JSON.parse(act.stdout)).toMatchObject({ session_id: 's1', active_toolsets: ['fs_read'] });
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
    const deact = await cli(stack, 'toolsets', 'deactivate', 'fs_read', '--session', 's1');
    expect(deact.stdout).toMatch(/active toolsets: none\nremoved tools: read_text_file/);
  });
});

describe('exit codes and errors', () => {
  it('has help for every command, lists them all, and suggests the nearest to a typo', async () => {
    const overview = await cli(undefined, '--help');
    for (const command of ['run', 'tasks', 'toolsets', 'approvals', 'audit', 'token']) {
      expect(overview.stdout, command).toContain(`toolshift ${command}`);
      const help = await cli(undefined, 'help', command);
      expect(help.code, command).toBe(0);
      expect(help.stdout.startsWith(`toolshift ${command} — `), command).toBe(true);
      expect((await cli(undefined, command, '--help')).stdout).toBe(help.stdout);
    }
    const typo = await cli(undefined, 'task');
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/^error: unknown command "task"; did you mean tasks\? commands: run, tasks/);
    expect((await cli(undefined, 'help', 'aprovals')).stderr).toMatch(/did you mean approvals\?/);
    expect((await cli(undefined, 'zzzzzzzz')).stderr).not.toMatch(/did you mean/);
  });

  it('takes -q as --quiet, leaving the goal alone', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, model: new ScriptedModel([answer('done quietly')]) });
    const quiet = await cli(stack, 'run', '-q', 'say it');
    expect(quiet).toMatchObject({ code: 0, stdout: 'done quietly\n', stderr: '' });
  });

  it('0 completed, 1 refused or failed, 2 usage, 3 unreachable or refused credentials', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const unknown = await cli(stack, 'toolsets', 'activate', 'nope');
    expect(unknown).toMatchObject({ code: 1, stdout: '' });
    expect(unknown.stderr).toBe('error: Unknown toolset id(s): nope. Valid ids: fs_read, fs_write\n');
    const noModel = await cli(stack, 'run', 'x');
    expect(noModel.code).toBe(1);
    expect(noModel.stderr).toMatch(/^error: No model is configured/);
    const missing = await cli(stack, 'tasks', 'show', 'task_missing');
    expect(missing.stderr).toBe('error: no task task_missing; toolshift tasks lists the recent ones\n');
    const usage = await cli(stack, 'frobnicate');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/unknown command "frobnicate"/);
    const badFlag = await cli(stack, 'run', 'x', '--max-steps', 'lots');
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(
      /--max-steps must be a positive whole number, got "lots"\nSee: toolshift --help/,
    );
    const unknownFlag = await cli(stack, 'run', 'x', '--frob');
    expect(unknownFlag.code).toBe(2);
    // Named plainly, with where the valid options are (not Node's parser text).
    expect(unknownFlag.stderr).toBe('error: unknown option --frob; see toolshift help run for the options\n');
    const mistyped = await cli(stack, 'run', 'x', '--max-step', '3');
    expect(mistyped.code).toBe(2);
    expect(mistyped.stderr).toBe(
      'error: unknown option --max-step; did you mean --max-steps? See toolshift help run for the options\n',
    );
    const noGoal = await cli(stack, 'run');
    expect(noGoal).toMatchObject({ code: 2 });
    expect(noGoal.stderr).toMatch(/run needs a goal.*\nSee: toolshift help run/);
    const unreachable = await cli(undefined, 'tasks');
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toBe(
      'error: cannot reach the agent-server at http://agent (ECONNREFUSED). Is toolshift running? Start it ' +
        'with `npm start`, or set AGENT_URL to where the agent-server listens.\n',
    );
    const gatewayDown = await cli(undefined, 'toolsets');
    expect(gatewayDown.stderr).toMatch(/cannot reach the mcp-gateway at http:\/\/gateway .* set GATEWAY_URL/);
  });

  it('says when a URL points at the wrong service, or at something that is not toolshift', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    const answeredBy = (name: string) => async (url: string, init?: RequestInit) => {
      const res = await s.gatewayApp.request(asLoopback(url), init);
      const headers = new Headers(res.headers);
      headers.set('x-toolshift-service', name);
      return new Response(res.body, { status: res.status, headers });
    };
    const wrong = await cliWith({ fetch: answeredBy('mcp-gateway') }, s, 'tasks');
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toBe(
      "error: http://agent is the toolshift mcp-gateway, not the agent-server: set AGENT_URL to the agent-server's address.\n",
    );
    const stranger = await cliWith(
      {
        fetch: async () =>
          new Response('<html>Not Found</html>', { status: 404, headers: { 'content-type': 'text/html' } }),
      },
      s,
      'tasks',
    );
    expect(stranger.code).toBe(3);
    expect(stranger.stderr).toMatch(
      /http:\/\/agent answered 404 \(text\/html\) and does not look like the toolshift agent-server: check AGENT_URL/,
    );
  });

  it('sends the tokens it has, and exits 3 naming the variable to set when a service answers 401', async () => {
    const tokens = { admin: 'op-secret-1', agent: 'agent-secret-2', user: 'user-secret-3' };
    const model = new ScriptedModel([answer('hello')]);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens, model });
    const run = await cli(stack, 'run', 'say hello');
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(
      /Missing credentials.*AGENT_API_TOKEN\nThe CLI takes AGENT_API_TOKEN from the environment, else from \S+credentials\.json \(written by the daemon at its first start\)/,
    );
    const list = await cli(stack, 'toolsets');
    expect(list.code).toBe(3);
    expect(list.stderr).toMatch(/\nThe CLI takes GATEWAY_ADMIN_TOKEN from the environment, else from/);
    expect(model.requests).toHaveLength(0);
    const envExtra = { AGENT_API_TOKEN: tokens.user, GATEWAY_ADMIN_TOKEN: tokens.admin };
    const ok = await cliWith({ envExtra }, stack, 'run', 'say hello');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe('hello\n');
    expect((await cliWith({ envExtra }, stack, 'tasks')).stdout).toMatch(/completed/);
    expect((await cliWith({ envExtra }, stack, 'toolsets', 'disable', 'fs_read')).code).toBe(0);
  });

  it('finds the services from AGENT_PORT and GATEWAY_PORT when no URL is given', async () => {
    const urls: string[] = [];
    const code = await main(['tasks'], {
      stdout: () => {},
      stderr: () => {},
      env: { AGENT_PORT: '18123', GATEWAY_PORT: '18124', ...NO_STORED_CREDENTIALS },
      fetch: async (url) => {
        urls.push(url);
        return Response.json({ tasks: [] });
      },
    });
    expect(code).toBe(0);
    expect(urls).toEqual(['http://127.0.0.1:18123/agent/tasks?limit=20']);
  });

  it('prints help for each command, and its version', async () => {
    const all = await cli(undefined, '--help');
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/toolshift run "<goal>" \| -/);
    expect(all.stdout).toMatch(/Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 .*\n {2}3 .*\n {2}130 /);
    for (const command of ['run', 'tasks', 'toolsets']) {
      const viaHelp = await cli(undefined, 'help', command);
      const viaFlag = await cli(undefined, command, '--help');
      expect(viaHelp.stdout).toMatch(new RegExp(`^toolshift ${command} — `));
      expect(viaFlag.stdout).toBe(viaHelp.stdout);
    }
    expect((await cli(undefined, 'help', 'run')).stdout).toMatch(/--cancel-on-interrupt/);
    expect((await cli(undefined, 'help', 'nope')).code).toBe(2);
    const bare = await cli(undefined);
    expect(bare.code).toBe(2);
    const version = await cli(undefined, '--version');
    expect(version.stdout).toMatch(/^toolshift \d+\.\d+\.\d+\n$/);
  });
});
