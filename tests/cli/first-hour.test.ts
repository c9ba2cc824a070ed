import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { TaskEvent } from '../../agent-server/contract.ts';
import { createProgress } from '../../cli/render.ts';
import { createStyle } from '../../cli/style.ts';
import { cliWith } from '../helpers/cli.ts';
import { answer, call, calls, ScriptedModel } from '../helpers/scripted-model.ts';
import { makeStack, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

// What a new user tripped over in the CLI in their first hour, driven the way they drove it: the CLI's own
// output, and what the services then do (which tools the next task's model is offered, what is on disk).

const stacks: Stack[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  for (const s of stacks.splice(0)) await s.close();
});

async function stack(opts: Parameters<typeof makeStack>[0]) {
  const s = await makeStack({ toolsets: SPLIT_TOOLSETS, ...opts });
  stacks.push(s);
  return s;
}

const cli = (s: Stack, ...argv: string[]) => cliWith({}, s, ...argv);
const toolsOffered = (model: ScriptedModel, request: number) => model.toolNames()[request] ?? [];

describe('toolsets from the CLI: the model of sessions', () => {
  it('activate without --session changes what every new task starts with, and says so', async () => {
    const model = new ScriptedModel([answer('one'), answer('two'), answer('three')]);
    const s = await stack({ model });
    expect(toolsOffered(model, 0)).toEqual([]);
    const on = await cli(s, 'toolsets', 'activate', 'fs_read');
    expect(on).toMatchObject({ code: 0, stderr: '' });
    expect(on.stdout).toBe(
      'fs_read added to the default toolsets\n' +
        'new tasks and MCP sessions start with: fs_read\n' +
        '  (a session that has changed its toolsets keeps them; change one with --session ID)\n',
    );
    // Each run is a new session: it starts with the default, so the model is offered its tools.
    expect((await cli(s, 'run', 'first')).code).toBe(0);
    expect(toolsOffered(model, 0)).toEqual([
      'manage_toolsets',
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    const listed = await cli(s, 'toolsets');
    expect(listed.stdout).toMatch(/^default: what every new task and MCP session starts with/);
    expect(listed.stdout).toMatch(/^fs_read +default +3 tools +Read files/m);
    expect(listed.stdout).toMatch(/^fs_write +3 tools +Create and change files/m);

    const again = await cli(s, 'toolsets', 'activate', 'fs_read');
    expect(again.stdout).toMatch(/^unchanged: fs_read\nnew tasks and MCP sessions start with: fs_read\n/);
    const off = await cli(s, 'toolsets', 'deactivate', 'fs_read');
    expect(off.stdout).toMatch(
      /^fs_read removed from the default toolsets\nnew tasks and MCP sessions start with: none\n/,
    );
    expect((await cli(s, 'run', 'second')).code).toBe(0);
    expect(toolsOffered(model, 1)).toEqual(['manage_toolsets']);

    // A disabled toolset cannot be a default; the refusal says how to enable it.
    await cli(s, 'toolsets', 'disable', 'fs_write');
    const refused = await cli(s, 'toolsets', 'activate', 'fs_write');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/disabled by the operator: fs_write; enable them first/);
  });

  it('with --session says which session changed and how to run in it; that run is offered its tools', async () => {
    const model = new ScriptedModel([answer('done')]);
    const s = await stack({ model });
    const res = await cli(s, 'toolsets', 'activate', 'fs_write', '--session', 'mywork');
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(
      'session mywork: active toolsets: fs_write\n' +
        'added tools: write_file, edit_file, delete_file\n' +
        'run in this session: toolshift run --session mywork "<goal>"\n',
    );
    expect((await cli(s, 'run', '--session', 'mywork', 'write something')).code).toBe(0);
    expect(toolsOffered(model, 0)).toEqual(['manage_toolsets', 'write_file', 'edit_file', 'delete_file']);
    const listed = await cli(s, 'toolsets', '--session', 'mywork');
    expect(listed.stdout).toMatch(/^session mywork \(active: what its next step offers the model\)\n/);
    expect(listed.stdout).toMatch(/^fs_write +active +3 tools/m);
  });

  it('disable and enable say what they did, not some session’s toolsets', async () => {
    const s = await stack({});
    const off = await cli(s, 'toolsets', 'disable', 'fs_write');
    expect(off.stdout).toBe(
      'disabled fs_write: no task or MCP client can use it, and every session lost it\n',
    );
    expect((await cli(s, 'toolsets', 'disable', 'fs_write')).stdout).toBe('already disabled: fs_write\n');
    expect((await cli(s, 'toolsets')).stdout).toMatch(/^fs_write +DISABLED +3 tools/m);
    expect((await cli(s, 'toolsets', 'enable', 'fs_write')).stdout).toBe(
      'enabled fs_write: tasks and MCP clients may activate it again\n',
    );
  });

  it('a query shows the tools it matched, and says when nothing matches', async () => {
    const s = await stack({});
    const hit = await cli(s, 'toolsets', '--query', 'delete a file');
    expect(hit.code).toBe(0);
    expect(hit.stdout).toMatch(/^fs_write .*\n {25}matched: delete_file/m);
    const miss = await cli(s, 'toolsets', '--query', 'zzqqxx');
    expect(miss).toMatchObject({
      code: 1,
      stdout: 'no toolset matches "zzqqxx"; toolshift toolsets lists them all\n',
    });
  });
});

describe('tasks and their steps', () => {
  it('lists tasks under a header with their age; an empty list says how to start one', async () => {
    const s = await stack({ model: new ScriptedModel([answer('ok')]) });
    expect((await cli(s, 'tasks')).stdout).toBe('no tasks yet: start one with toolshift run "<goal>"\n');
    await cli(s, 'run', 'say   ok\nplease');
    const { stdout } = await cli(s, 'tasks');
    const [header, row, ...rest] = stdout.split('\n');
    expect(header).toMatch(/^TASK +STATUS +STEPS +STARTED +GOAL$/);
    expect(row).toMatch(/^task_[0-9a-f-]+ +completed +1 +\d+s ago +say ok please$/);
    expect(rest).toEqual(['']);
  });

  it('shows a LIST step with its query, and what the task cost and saved', async () => {
    const model = new ScriptedModel([
      calls(call('manage_toolsets', { action: 'LIST', query: 'write files' })),
      answer('found fs_write'),
    ]);
    const s = await stack({ model });
    const res = await cli(s, 'run', 'which toolset writes?');
    expect(res.code).toBe(0);
    expect(res.stderr).toMatch(/ {2}✓ manage_toolsets LIST "write files" \d/);
    // Every toolset here is native, so the figure is whole: no "at least".
    expect(res.stderr).toMatch(/tool definitions [\d,]+ tokens, [\d,]+ saved vs all toolsets loaded · /);
  });

  it('a late watcher counts the spinner from when the step began, not from attaching', () => {
    let drawn = '';
    const now = Date.parse('2026-01-01T10:01:30Z');
    const progress = createProgress({
      write: (t) => {
        drawn += t;
      },
      style: createStyle(false),
      live: true,
      now: () => now,
      setInterval: () => 1,
      clearInterval: () => {},
    });
    const event: TaskEvent = {
      seq: 2,
      type: 'model_request',
      at: '2026-01-01T10:00:00Z',
      duration_ms: null,
      data: {
        step: 1,
        tools: ['manage_toolsets'],
        tool_tokens: 100,
        message_tokens: 50,
        messages: 2,
        all_toolsets_tool_tokens: 900,
        tokenizer: 'o200k_base',
        exposure: 'native',
      },
    };
    progress.onEvent(event);
    expect(drawn).toMatch(/step 1 · thinking… .* 90\.0s$/);
  });
  it('says who decided an approval and why', () => {
    let drawn = '';
    const progress = createProgress({
      write: (t) => {
        drawn += t;
      },
      style: createStyle(false),
      live: false,
      now: () => 0,
      setInterval: () => 1,
      clearInterval: () => {},
    });
    const decided = (data: { approved: boolean } & Record<string, unknown>): TaskEvent => ({
      seq: 3,
      type: 'approval_decided',
      at: '2026-01-01T10:00:00Z',
      duration_ms: null,
      data: { call_id: 'call_1', approval_id: 'apr_1', ...data },
    });
    progress.onEvent(decided({ approved: true, decided_by: 'operator (GATEWAY_ADMIN_TOKEN)' }));
    progress.onEvent(
      decided({
        approved: false,
        decided_by: 'user (AGENT_API_TOKEN)',
        reason: 'not today',
        message: 'a human denied it, decided by user (AGENT_API_TOKEN): not today',
      }),
    );
    expect(drawn).toBe(
      '  ✓ approved by operator (GATEWAY_ADMIN_TOKEN)\n  ✗ not approved by user (AGENT_API_TOKEN): not today\n',
    );
  });

  it('says what a compaction of the context moved out, on one line', () => {
    let drawn = '';
    const progress = createProgress({
      write: (t) => {
        drawn += t;
      },
      style: createStyle(false),
      live: false,
      now: () => 0,
      setInterval: () => 1,
      clearInterval: () => {},
    });
    progress.onEvent({
      seq: 4,
      type: 'context_compacted',
      at: '2026-01-01T10:00:00Z',
      duration_ms: null,
      data: { step: 3, stubbed: 4, summarised_messages: 12, tokens_before: 90_210, tokens_after: 20_004 },
    });
    expect(drawn).toBe(
      '  context compacted: 4 results moved out, 12 messages summarised, tokens 90,210 → 20,004\n',
    );
  });
});

describe('the saving, counted from what is known', () => {
  const MEMORY = readFileSync(path.resolve('toolsets/memory.yaml'), 'utf8');

  it('names the toolsets whose servers never started instead of guessing them', async () => {
    const model = new ScriptedModel([answer('hi'), answer('again')]);
    const s = await stack({ model, toolsets: { ...SPLIT_TOOLSETS, 'memory.yaml': MEMORY } });
    const res = await cli(s, 'run', 'hello');
    expect(res.stderr).toMatch(
      /tool definitions [\d,]+ tokens, at least [\d,]+ saved vs all toolsets loaded \(not counted: memory, not started yet\)/,
    );
    const json = await cli(s, 'run', '--json', 'hello again');
    const result = JSON.parse(json.stdout.trim().split('\n').at(-1) as string);
    expect(result.tokens.all_toolsets_not_counted).toEqual(['memory']);
    expect(result.tokens.all_toolsets_tool_tokens).toBeGreaterThan(result.tokens.tool_definition_tokens);
  });

  it('claims no saving for a task whose model never answered', async () => {
    const model = new ScriptedModel([
      () => {
        throw new Error('the model endpoint is down');
      },
    ]);
    const s = await stack({ model });
    const res = await cli(s, 'run', 'anything');
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/✘ failed in 0 steps/);
    expect(res.stderr).not.toMatch(/saved|tool definitions/);
    const json = JSON.parse((await cli(s, 'tasks', 'list', '--json')).stdout)[0];
    expect(json.tokens).toMatchObject({
      requests: 0,
      tool_definition_tokens: 0,
      all_toolsets_tool_tokens: 0,
    });
  });
});

describe('one approvals surface', () => {
  it('lists what an MCP client waits for beside tasks, and decides it by its id', async () => {
    const s = await stack({ policy: 'rules:\n  - { tool: write_file, decision: ask }\n' });
    // A reload says which policy is in force: its file, one rule (not "1 rules"), the default.
    const reloaded = await cli(s, 'toolsets', 'reload');
    expect(reloaded.stdout).toMatch(/^policy: \S+policy\.yaml: 1 rule, default allow$/m);
    const client = new Client(
      { name: 'desktop', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL('http://127.0.0.1/mcp'), {
        fetch: async (url, init) => s.gatewayApp.request(String(url), init),
      }),
    );
    clients.push(client);
    const text = (r: { content?: unknown }) => (r.content as { text: string }[])[0]?.text ?? '';
    const activated = await client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
    });
    const session = JSON.parse(text(activated)).session as string;
    const write = { name: 'write_file', arguments: { path: 'from-mcp.txt', content: 'asked first' } };
    const asked = await client.callTool({ name: 'call_tool', arguments: { ...write, session } });
    expect(asked.isError).toBe(true);
    expect(existsSync(path.join(s.root, 'from-mcp.txt'))).toBe(false);

    const listed = await cli(s, 'approvals');
    expect(listed.code).toBe(0);
    const line = new RegExp(
      `^(apr_\\S+) {2}MCP session ${session} {2}write_file \\{"path":"from-mcp.txt","content":"asked first"\\}`,
      'm',
    );
    expect(listed.stdout).toMatch(line);
    expect(listed.stdout).toMatch(/^decide: toolshift approvals approve\|deny <id>/m);
    const id = (line.exec(listed.stdout) as RegExpExecArray)[1];

    const approved = await cli(s, 'approvals', 'approve', id);
    expect(approved.code).toBe(0);
    expect(approved.stdout).toMatch(
      /^approved by local: write_file .*\n {2}the MCP client gets it when it sends the same call again\n$/,
    );
    const retried = await client.callTool({ name: 'call_tool', arguments: { ...write, session } });
    expect(retried.isError).toBeFalsy();
    expect(await readFile(path.join(s.root, 'from-mcp.txt'), 'utf8')).toBe('asked first');
    expect((await cli(s, 'approvals')).stdout).toBe(
      'nothing waits for an approval (no task, no MCP client)\n',
    );
    const unknown = await cli(s, 'approvals', 'deny', 'apr_nope');
    expect(unknown).toMatchObject({
      code: 1,
      stderr: 'error: no pending approval apr_nope; toolshift approvals lists them\n',
    });
  });
});

describe('a busy agent-server', () => {
  it('run waits as retry-after says while MAX_CONCURRENT_TASKS run and nothing may queue, says so, then runs', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const model = new ScriptedModel([
      async () => {
        await held;
        return answer('first done');
      },
      answer('second done'),
    ]);
    const s = await stack({ model, maxConcurrentTasks: 1, maxQueuedTasks: 0 });
    expect((await cli(s, 'run', '--detach', 'first')).code).toBe(0);
    const waits: number[] = [];
    const res = await cliWith(
      {
        sleep: async (ms) => {
          waits.push(ms);
          release();
          await new Promise((r) => setTimeout(r, 50));
        },
      },
      s,
      'run',
      'second',
    );
    expect(res.code).toBe(0);
    expect(res.stdout).toBe('second done\n');
    expect(waits[0]).toBe(5000);
    expect(res.stderr).toMatch(
      /^1 tasks are running, the most this agent-server runs at once \(MAX_CONCURRENT_TASKS=1\)\.\nwaiting for room: trying again every 5s \(Ctrl-C gives up; nothing was started\)…\n/,
    );
  });
});

describe('a closed pipe', () => {
  it('toolshift … | head: a reader that leaves early ends the CLI quietly, exit 0', async () => {
    const child = spawn(process.execPath, [path.resolve('bin/toolshift.js'), 'help', 'toolsets'], {
      env: { PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // The reader goes before the first byte: every write meets EPIPE.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c;
    });
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  });
});
