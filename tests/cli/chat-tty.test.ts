import { spawn } from 'node:child_process';
import path from 'node:path';
import { delay, HttpResponse, http } from 'msw';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoopbackServices } from '../helpers/loopback-services.ts';
import { chunk, MODEL_BASE_URL, modelEdge, streamed, textChunks } from '../helpers/msw.ts';
import { runOnPty } from '../helpers/pty.ts';

// `toolshift chat`, the real command in a child process on a pseudo-terminal, against the three services on
// loopback with the model mocked at its HTTP edge, streaming its answers.

const server = modelEdge();
const BIN = path.resolve('bin/toolshift.js');
let loopback: Awaited<ReturnType<typeof startLoopbackServices>> | undefined;
let env: Record<string, string | undefined>;
let agentUrl: string;

/** The reply to a request whose last user message is the key. */
const replies = new Map<string, () => Promise<Response>>();
/** The user messages of each model request, in order. */
const asked: string[][] = [];

beforeAll(async () => {
  loopback = await startLoopbackServices('chat');
  ({ agentUrl, env } = loopback);
  server.use(
    http.post(`${MODEL_BASE_URL}/chat/completions`, async ({ request }) => {
      const body = (await request.json()) as { messages: { role: string; content: string }[] };
      const said = body.messages.filter((m) => m.role === 'user').map((m) => m.content);
      asked.push(said);
      const reply = replies.get(said.at(-1) ?? '');
      if (!reply) return HttpResponse.json({ error: { message: 'no reply scripted' } }, { status: 400 });
      return reply();
    }),
  );
});

afterAll(async () => {
  server.close();
  await loopback?.close();
});

function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { opened, open };
}

const ESC = String.fromCharCode(27);
/** The chat's prompt as the terminal shows it (bold). */
const PROMPT = `${ESC}[1m> ${ESC}[22m`;

async function threadOf(id: string) {
  const res = await fetch(`${agentUrl}/agent/threads/${id}`);
  return (await res.json()) as { turns: { goal: string; status: string }[] };
}

describe('toolshift chat on a terminal', () => {
  it('streams each answer, keeps one thread, cancels a turn on Ctrl-C, starts another with /new, leaves on Ctrl-D', async () => {
    const rest = gate();
    replies.set('hello there', async () =>
      streamed([chunk({ role: 'assistant', content: 'Hello ' })], {
        after: { opened: rest.opened, rest: textChunks('friend.').slice(1) },
      }),
    );
    replies.set('what did I say?', async () => streamed(textChunks('You said hello there.')));
    replies.set('think forever', async () => {
      await delay('infinite');
      return streamed(textChunks('never'));
    });
    replies.set('still there?', async () => streamed(textChunks('Still here.')));
    replies.set('fresh start', async () => streamed(textChunks('A new page.')));

    const p = runOnPty(process.execPath, [BIN, 'chat'], env);
    const prompts = (n: number) =>
      expect.poll(() => p.output().split(PROMPT).length - 1, { timeout: 20_000, interval: 20 }).toBe(n);
    await prompts(1);
    expect(p.output()).toContain('a new thread starts with your first line');

    // The first turn: its words show while the model still writes.
    p.type('hello there\r');
    await p.waitFor(/Hello /);
    expect(p.output()).not.toContain('friend.');
    rest.open();
    await p.waitFor(/Hello friend\.\r\n/);
    await prompts(2);
    expect(p.output().match(/Hello friend\./g)).toHaveLength(1);

    p.type('/thread\r');
    await p.waitFor(/thread (thr_[0-9a-f-]+)\r\n {2}continue it here: toolshift chat --thread thr_/);
    const thread = /thread (thr_[0-9a-f-]+)\r\n/.exec(p.output())?.[1] as string;
    await prompts(3);

    // The second turn is on the same thread: the model sees the first.
    p.type('what did I say?\r');
    await p.waitFor(/You said hello there\./);
    await prompts(4);
    expect(asked.find((a) => a.at(-1) === 'what did I say?')).toEqual(['hello there', 'what did I say?']);

    // Ctrl-C during a turn cancels that turn, not the chat.
    p.type('think forever\r');
    await p.waitFor(/think forever\r+\n[\s\S]*thinking…/);
    p.type('\x03');
    await p.waitFor(/✘.*cancelled/);
    await prompts(5);
    await expect.poll(async () => (await threadOf(thread)).turns.at(-1)?.status).toBe('cancelled');
    p.type('still there?\r');
    await p.waitFor(/Still here\./);
    await prompts(6);
    expect((await threadOf(thread)).turns.map((t) => t.goal)).toEqual([
      'hello there',
      'what did I say?',
      'think forever',
      'still there?',
    ]);

    p.type('/new\r');
    await p.waitFor(/a new thread starts with your next line/);
    await prompts(7);
    p.type('fresh start\r');
    await p.waitFor(/A new page\./);
    await prompts(8);
    const threads = [...p.output().matchAll(/thread (thr_[0-9a-f-]+) \(\/thread/g)].map((m) => m[1]);
    expect(threads).toHaveLength(2);
    expect(threads[1]).not.toBe(thread);
    expect(asked.find((a) => a.at(-1) === 'fresh start')).toEqual(['fresh start']);

    p.type('\x04');
    expect(await p.exited).toBe(0);
  });

  it('clears a typed line on Ctrl-C, and leaves on Ctrl-C at an empty prompt', async () => {
    const p = runOnPty(process.execPath, [BIN, 'chat'], env);
    await p.waitFor(new RegExp(PROMPT.replace(/\[/g, '\\[')));
    p.type('half a thought');
    await p.waitFor(/half a thought/);
    p.type('\x03');
    // The line is gone: what is typed next is a line of its own.
    p.type('/thread\r');
    // The next prompt is up (its line reader has the terminal) before Ctrl-C is typed at it.
    const prompt = PROMPT.replace(/\[/g, '\\[');
    await p.waitFor(new RegExp(`no thread yet: your next line starts one[\\s\\S]*${prompt}`));
    p.type('\x03');
    expect(await p.exited).toBe(0);
    expect(asked.flat()).not.toContain('half a thought');
  });
});

describe('toolshift chat piped', () => {
  it('takes each line as a turn of one thread, prints each answer plainly on stdout, and exits 0 at the end', async () => {
    replies.set('piped one', async () => streamed(textChunks('First answer.')));
    replies.set('piped two', async () => streamed(textChunks('Second answer.')));
    const child = spawn(process.execPath, [BIN, 'chat'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c;
    });
    child.stdin.end('piped one\n/thread\npiped two\n');
    expect(await new Promise<number | null>((r) => child.on('exit', r))).toBe(0);
    expect(stdout).toBe('First answer.\nSecond answer.\n');
    expect(stderr).not.toContain(ESC);
    expect(stderr).toMatch(/\nthread thr_[0-9a-f-]+\n {2}continue it here: toolshift chat --thread thr_/);
    expect(asked.find((a) => a.at(-1) === 'piped two')).toEqual(['piped one', 'piped two']);
  });
});
