import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { delay, HttpResponse, http } from 'msw';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../client.ts';
import { startLoopbackServices } from '../helpers/loopback-services.ts';
import { chunk, completion, MODEL_BASE_URL, modelEdge, streamed, textChunks } from '../helpers/msw.ts';
import { runOnPty } from '../helpers/pty.ts';

// The real `toolshift` command in a child process against the three services on loopback (the model mocked at
// its HTTP edge): on a pseudo-terminal (spinner, colour, Ctrl-C typed on the terminal) and piped (SIGINT).

const server = modelEdge();
const BIN = path.resolve('bin/toolshift.js');
let tmp: string;
let loopback: Awaited<ReturnType<typeof startLoopbackServices>> | undefined;
let env: Record<string, string | undefined>;
let agentUrl: string;

/** What the mocked model does for each call of the task with a goal, in order (the tests run at once). */
const scripts = new Map<string, { replies: (() => Promise<Response>)[]; served: number }>();
/** Sets the replies of the task whose goal is `goal`. */
const script = (goal: string, replies: (() => Promise<Response>)[]) =>
  scripts.set(goal, { replies, served: 0 });

beforeAll(async () => {
  loopback = await startLoopbackServices('tty');
  ({ tmp, agentUrl, env } = loopback);
  server.use(
    http.post(`${MODEL_BASE_URL}/chat/completions`, async ({ request }) => {
      const body = (await request.json()) as { messages: { content: string }[] };
      const s = scripts.get(body.messages[1].content);
      const reply = s?.replies[s.served++];
      if (!reply) return HttpResponse.json({ error: { message: 'no more replies' } }, { status: 400 });
      return reply();
    }),
  );
});

afterAll(async () => {
  server.close();
  await loopback?.close();
});

const toolCall = (name: string, args: unknown) =>
  HttpResponse.json(
    completion({
      tool_calls: [
        { id: `c_${name}`, type: 'function', function: { name, arguments: JSON.stringify(args) } },
      ],
    }),
  );
const text = (content: string) => HttpResponse.json(completion({ content }));
/** A reply held until `opened` resolves. */
const heldUntil = (opened: Promise<void>, reply: () => Response) => async () => {
  await opened;
  return reply();
};
/** A streamed answer: its first words once `started` resolves, the rest (and its end) once `opened` does. */
const streamedUntil =
  (started: Promise<void>, opened: Promise<void>, first: string, rest: string) => async () => {
    await started;
    return streamed([chunk({ role: 'assistant', content: first })], {
      after: { opened, rest: textChunks(rest).slice(1) },
    });
  };
/** A reply that never comes; the call ends only when the agent aborts it. */
const never = async () => {
  await delay('infinite');
  return text('never');
};

function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { opened, open };
}

const ESC = String.fromCharCode(27);
const idOf = (output: string) => /task (task_[0-9a-f-]+)/.exec(output)?.[1] ?? '';

async function taskStatus(id: string): Promise<string> {
  return ((await (await fetch(`${agentUrl}/agent/tasks/${id}`)).json()) as { status: string }).status;
}

describe('toolshift run on a terminal', () => {
  it.concurrent('shows a spinner with elapsed time while the model thinks, coloured lines and a summary', async () => {
    const thinking = gate();
    script('write notes.txt', [
      heldUntil(thinking.opened, () =>
        toolCall('manage_toolsets', { action: 'ACTIVATE', toolset_ids: ['file_system_tools'] }),
      ),
      async () => toolCall('write_file', { path: 'notes.txt', content: 'written on a tty' }),
      async () => text('Wrote notes.txt'),
    ]);
    const p = runOnPty(process.execPath, [BIN, 'run', 'write notes.txt'], env);
    await p.waitFor(/thinking…/);
    // The spinner redraws in place: carriage return, clear line, a braille frame, the elapsed time.
    await p.waitFor(
      new RegExp(
        `\\r${ESC}\\[K${ESC}\\[36m[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]${ESC}\\[39m step 1 · thinking… .*${ESC}\\[2m\\d+ ms${ESC}\\[22m`,
      ),
    );
    thinking.open();
    expect(await p.exited).toBe(0);
    const out = p.output();
    expect(out).toContain(`${ESC}[35m${ESC}[1m✚ activated file_system_tools${ESC}[22m${ESC}[39m`);
    expect(out).toMatch(new RegExp(`  ${ESC}\\[32m✓${ESC}\\[39m write_file`));
    expect(out).toMatch(new RegExp(`${ESC}\\[32m✔${ESC}\\[39m ${ESC}\\[1mcompleted${ESC}\\[22m in 3 steps`));
    // The upstream servers never started, so their definitions are unknown: named, not guessed.
    expect(out).toMatch(
      /tool definitions [\d,]+ tokens, at least [\d,]+ saved vs all toolsets loaded \(not counted: memory, sequential_thinking, not started yet\) · toolsets: file_system_tools/,
    );
    expect(out).toMatch(/\r\nWrote notes\.txt\r\n/);
    expect(await readFile(path.join(tmp, 'workspace/notes.txt'), 'utf8')).toBe('written on a tty');
  });

  it.concurrent('respects NO_COLOR on a terminal: the spinner stays, the colours go', async () => {
    const thinking = gate();
    script('answer plainly', [heldUntil(thinking.opened, () => text('plain'))]);
    const p = runOnPty(process.execPath, [BIN, 'run', 'answer plainly'], { ...env, NO_COLOR: '1' });
    await p.waitFor(new RegExp(`\r${ESC}\\[K⠋ step 1 · thinking…`));
    thinking.open();
    expect(await p.exited).toBe(0);
    expect(p.output()).not.toMatch(new RegExp(`${ESC}\\[(1|2|3\\d)m`));
    expect(p.output()).toMatch(/✔ completed in 1 step/);
  });

  it.concurrent('asks on the first Ctrl-C and cancels the task on the server on the second', async () => {
    script('think forever', [never]);
    const p = runOnPty(process.execPath, [BIN, 'run', 'think forever'], env);
    await p.waitFor(/thinking…/);
    p.type('\x03');
    await p.waitFor(/cancel the task\? \(the server keeps running it if you detach\)/);
    p.type('\x03');
    expect(await p.exited).toBe(1);
    const out = p.output();
    expect(out).toMatch(/cancelling task task_[0-9a-f-]+ on the server…/);
    expect(out).toMatch(/✘.*cancelled.* in 0 steps/);
    expect(await taskStatus(idOf(out))).toBe('cancelled');
  });

  it.concurrent('cancels on Ctrl-C then y under npx, and exits 1 as a cancelled task does', async () => {
    // Through npx (npm, then sh -c) as the README starts it: a SIGINT from the terminal killed npm's shell
    // and npm exited 130. The terminal is raw while following, so Ctrl-C is a key only the CLI reads.
    script('cancel when asked', [never]);
    const p = runOnPty('npx', ['toolshift', 'run', 'cancel when asked'], { ...env, PATH: process.env.PATH });
    await p.waitFor(/thinking…/);
    p.type('\x03');
    await p.waitFor(/\[y = cancel, N = detach, Ctrl-C = cancel\]/);
    p.type('y\r');
    expect(await p.exited).toBe(1);
    const out = p.output();
    expect(out).toMatch(/✘.*cancelled.* in 0 steps/);
    expect(out).not.toContain('detached');
    expect(await taskStatus(idOf(out))).toBe('cancelled');
  });

  it.concurrent('tasks watch, attached late, counts the step from when it began, not from attaching', async () => {
    const later = gate();
    let asked = 0;
    script('a long think', [
      async () => {
        asked = Date.now();
        await later.opened;
        return text('thought it through');
      },
    ]);
    const run = main(['run', '--detach', 'a long think'], { stdout: () => {}, stderr: () => {}, env });
    expect(await run).toBe(0);
    const listed = (await (await fetch(`${agentUrl}/agent/tasks?limit=50`)).json()) as {
      tasks: { task_id: string; goal: string }[];
    };
    const id = listed.tasks.find((t) => t.goal === 'a long think')?.task_id as string;
    // Attached once the step has been thinking for two seconds (the model's call held that long).
    await expect
      .poll(() => asked > 0 && Date.now() - asked >= 2000, { timeout: 15_000, interval: 50 })
      .toBe(true);
    const p = runOnPty(process.execPath, [BIN, 'tasks', 'watch', id], env);
    // The spinner's first drawing already shows the two seconds the model has been thinking.
    await p.waitFor(/step 1 · thinking… .*(?:[2-9]|\d\d)\.\ds/);
    later.open();
    expect(await p.exited).toBe(0);
    expect(p.output()).not.toMatch(new RegExp(`step 1 · thinking… [^\\r]* ${ESC}\\[2m\\d+ ms`));
  });

  it.concurrent('shows the answer as it streams, once, without the escape sequences in it', async () => {
    const first = gate();
    const rest = gate();
    script('stream an answer', [
      streamedUntil(
        first.opened,
        rest.opened,
        'The answer ',
        `is ${ESC}]0;title${String.fromCharCode(7)}42.`,
      ),
    ]);
    const p = runOnPty(process.execPath, [BIN, 'run', 'stream an answer'], env);
    // Followed from before the model writes (the text is not stored: a follower hears it only as it comes).
    await p.waitFor(/thinking…/);
    first.open();
    // The first words show while the model is still writing (the spinner gave way to them).
    await p.waitFor(/The answer /);
    expect(p.output()).not.toContain('42.');
    rest.open();
    expect(await p.exited).toBe(0);
    const out = p.output();
    expect(out).toMatch(/The answer is \]0;title42\.\r\nstep 1 · model .* → .*answer/);
    expect(out).not.toContain(`${ESC}]0;`);
    // Shown as it streamed, so not printed again at the end.
    expect(out.match(/The answer is/g)).toHaveLength(1);
  });

  it.concurrent('detaches on Ctrl-C then Enter, leaving the task running, and tasks watch re-attaches', async () => {
    const later = gate();
    script('keep going', [heldUntil(later.opened, () => text('finished without me'))]);
    const p = runOnPty(process.execPath, [BIN, 'run', 'keep going'], env);
    await p.waitFor(/thinking…/);
    p.type('\x03');
    await p.waitFor(/\[y = cancel, N = detach, Ctrl-C = cancel\]/);
    p.type('\r');
    expect(await p.exited).toBe(130);
    const out = p.output();
    const id = idOf(out);
    expect(out).toContain(`detached: task ${id} keeps running on the server.`);
    expect(out).toContain(`follow it again: toolshift tasks watch ${id}`);
    expect(await taskStatus(id)).toBe('running');
    let stdout = '';
    const watching = main(['tasks', 'watch', id], {
      stdout: (t) => {
        stdout += t;
      },
      stderr: () => {},
      env,
    });
    later.open();
    expect(await watching).toBe(0);
    expect(stdout).toBe('finished without me\n');
  });
});

describe('toolshift run piped', () => {
  it.concurrent('prints a streamed answer once on stdout, and no streamed text among the progress lines', async () => {
    script('stream to a pipe', [async () => streamed(textChunks('Piped answer.'))]);
    const child = spawn(process.execPath, [BIN, 'run', 'stream to a pipe'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c;
    });
    expect(await new Promise<number | null>((r) => child.on('exit', r))).toBe(0);
    expect(stdout).toBe('Piped answer.\n');
    expect(stderr).not.toContain('Piped');
    expect(stderr).toMatch(/step 1 · model .* → answer/);
  });
});

describe('toolshift run piped, interrupted', () => {
  it.concurrent('cancels at the first SIGINT with --cancel-on-interrupt, with plain output', async () => {
    script('stop me', [never]);
    const child = spawn(process.execPath, [BIN, 'run', 'stop me', '--cancel-on-interrupt'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    const asked = new Promise<void>((resolve) =>
      child.stderr.on('data', (c: Buffer) => {
        stderr += c;
        if (/asking the model/.test(stderr)) resolve();
      }),
    );
    await asked;
    child.kill('SIGINT');
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).not.toContain(ESC);
    expect(stderr).toMatch(/^task task_[0-9a-f-]+ · session .*\nstep 1 · asking the model · 1 tool/);
    expect(stderr).toMatch(/cancelling task task_[0-9a-f-]+ on the server…\n/);
    expect(stderr).toMatch(/✘ cancelled in 0 steps/);
  });
});
