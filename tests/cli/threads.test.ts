import { afterEach, describe, expect, it } from 'vitest';
import type { ChatPrompt } from '../../cli/io.ts';
import { cliWith } from '../helpers/cli.ts';
import { answer, ScriptedModel } from '../helpers/scripted-model.ts';
import { makeStack, type Stack } from '../helpers/stack.ts';

// Threads from the CLI, in-process against the in-process stack: `run --thread` continuing one, `threads`
// listing, showing and deleting them, and `chat` fed its lines as a pipe would.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const cli = (s: Stack, ...argv: string[]) => cliWith({}, s, ...argv);
const threadOf = (text: string) => /--thread (thr_[0-9a-f-]+)/.exec(text)?.[1] ?? '';

/** The lines a pipe would give `chat`, one a prompt. */
function piped(lines: string[]): () => ChatPrompt {
  return () => ({
    next: async () => lines.shift(),
    close: () => {},
  });
}

/** What the model was sent as the user's words, request by request. */
const userWords = (model: ScriptedModel) =>
  model.requests.map((r) => r.messages.filter((m) => m.role === 'user').map((m) => m.content));

describe('toolshift run --thread', () => {
  it('continues a thread: the second goal sees the first turn, and each run says how to continue', async () => {
    const model = new ScriptedModel([answer('Blue.'), answer('You said blue.')]);
    stack = await makeStack({ model });
    const first = await cli(stack, 'run', 'my favourite colour is blue');
    expect(first.code).toBe(0);
    const thread = threadOf(first.stderr);
    expect(thread).toMatch(/^thr_/);
    expect(first.stderr).toMatch(new RegExp(`\\n {2}continue it: toolshift run --thread ${thread} "…"\\n$`));
    const second = await cli(stack, 'run', '--thread', thread, 'what is my favourite colour?');
    expect(second).toMatchObject({ code: 0, stdout: 'You said blue.\n' });
    expect(userWords(model)[1]).toEqual(['my favourite colour is blue', 'what is my favourite colour?']);
    const assistant = model.requests[1].messages.filter((m) => m.role === 'assistant');
    expect(assistant.map((m) => m.content)).toContain('Blue.');
  });

  it('puts the thread in the detached and JSON outputs, and nothing more with --quiet', async () => {
    stack = await makeStack({ model: new ScriptedModel([answer('one'), answer('two')]) });
    const detached = await cli(stack, 'run', '--detach', '--json', 'first');
    expect(JSON.parse(detached.stdout)).toMatchObject({ thread_id: expect.stringMatching(/^thr_/) });
    const quiet = await cli(stack, 'run', '--quiet', 'second');
    expect(quiet).toMatchObject({ code: 0, stdout: 'two\n', stderr: '' });
  });

  it('refuses an --if-busy it does not know, naming those it does', async () => {
    stack = await makeStack({ model: new ScriptedModel([]) });
    const res = await cli(stack, 'run', '--if-busy', 'later', 'x');
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/--if-busy must be enqueue .*, reject or interrupt .*, got "later"/);
  });
});

describe('toolshift threads', () => {
  it('lists, shows and deletes threads; an unknown one points at the listing', async () => {
    const model = new ScriptedModel([answer('Noted: 7.'), answer('It was 7.')]);
    stack = await makeStack({ model });
    const empty = await cli(stack, 'threads');
    expect(empty.stdout).toMatch(/^no threads yet: start one with toolshift chat/);
    const first = await cli(stack, 'run', 'remember the number 7');
    const thread = threadOf(first.stderr);
    await cli(stack, 'run', '--thread', thread, 'which number?');

    const list = await cli(stack, 'threads', 'list');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(
      new RegExp(`^THREAD +UPDATED +TITLE\\n${thread} +\\d+s ago +remember the number 7\\n$`),
    );

    const show = await cli(stack, 'threads', 'show', thread);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('title: remember the number 7\n2 turns\n');
    expect(show.stdout).toMatch(
      /\n1\. completed {2}task task_[0-9a-f-]+ .*\n {3}goal: remember the number 7\n {3}answer: Noted: 7\.\n/,
    );
    expect(show.stdout).toMatch(
      /\n2\. completed {2}task task_[0-9a-f-]+ .*\n {3}goal: which number\?\n {3}answer: It was 7\.\n/,
    );
    const json = JSON.parse((await cli(stack, 'threads', 'show', thread, '--json')).stdout);
    expect(json.turns).toHaveLength(2);

    const deleted = await cli(stack, 'threads', 'delete', thread);
    expect(deleted).toMatchObject({ code: 0, stdout: `deleted thread ${thread} and its 2 tasks\n` });
    const gone = await cli(stack, 'threads', 'show', thread);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toBe(`error: no thread ${thread}; toolshift threads lists yours\n`);
    const unknown = await cli(stack, 'threads', 'rename', thread);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown threads command "rename"; use list, show or delete/);
  });
});

describe('toolshift chat, piped', () => {
  it('sends each line as a turn of one thread, answers on stdout; /new starts another, unknown commands are named', async () => {
    const model = new ScriptedModel([answer('Hello, Ann.'), answer('Your name is Ann.'), answer('Hi.')]);
    stack = await makeStack({ model });
    const lines = ['my name is Ann', '/thread', '  ', 'what is my name?', '/nope', '/new', 'hello again'];
    const res = await cliWith({ openPrompt: piped(lines) }, stack, 'chat');
    expect(res.code).toBe(0);
    expect(res.stdout).toBe('Hello, Ann.\nYour name is Ann.\nHi.\n');
    expect(userWords(model)).toEqual([
      ['my name is Ann'],
      ['my name is Ann', 'what is my name?'],
      ['hello again'],
    ]);
    expect(res.stderr).toMatch(/thread thr_[0-9a-f-]+\n {2}continue it here: toolshift chat --thread thr_/);
    expect(res.stderr).toContain(
      'unknown command /nope; the commands are /new, /thread, /toolsets, /help, /exit\n',
    );
    expect(res.stderr).toContain('a new thread starts with your next line\n');
    const { threads } = await (await stack.agentApp.request('/agent/threads')).json();
    expect(threads).toHaveLength(2);
  });

  it('refuses a line over the goal limit without sending it, and /toolsets lists the session of the thread', async () => {
    const model = new ScriptedModel([answer('ok')]);
    stack = await makeStack({ model });
    const lines = ['x'.repeat(64 * 1024 + 1), '/toolsets', 'short goal', '/toolsets', '/exit', 'never sent'];
    const res = await cliWith({ openPrompt: piped(lines) }, stack, 'chat');
    expect(res.code).toBe(0);
    expect(res.stderr).toContain('not sent: a goal is at most 65536 characters, and that line has 65537\n');
    expect(res.stderr).toContain('no thread yet: it starts with your default toolsets');
    expect(res.stderr).toMatch(/active in session ses_[0-9a-f-]+: /);
    expect(model.requests).toHaveLength(1);
  });
});
