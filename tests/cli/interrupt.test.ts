import { afterEach, describe, expect, it } from 'vitest';
import type { Model, ModelReply } from '../../agent-server/clients/model.ts';
import { type CliIo, main } from '../../client.ts';
import { NO_STORED_CREDENTIALS } from '../helpers/credentials.ts';
import { answer } from '../helpers/scripted-model.ts';
import { asLoopback, makeStack, SPLIT_TOOLSETS, type Stack } from '../helpers/stack.ts';

// The CLI's Ctrl-C handling and its terminal display, in-process with a hand-driven clock, timer and Ctrl-C.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const ESC = String.fromCharCode(27);

/** A model whose first call waits until released (or until the task is stopped), then answers `text`. */
function heldModel(text: string) {
  let release: () => void = () => {};
  let reached: () => void = () => {};
  const released = new Promise<void>((r) => {
    release = r;
  });
  const called = new Promise<void>((r) => {
    reached = r;
  });
  const model: Model = {
    async complete(_request, options = {}): Promise<ModelReply> {
      reached();
      await new Promise<void>((resolve, reject) => {
        released.then(resolve, reject);
        options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
      });
      return answer(text);
    },
  };
  return { model, release, called };
}

/** An io over the stack with a Ctrl-C button, a hand-driven clock and spinner timer, and captured output. */
function terminal(s: Stack, opts: Partial<CliIo> = {}) {
  const out = { stdout: '', stderr: '' };
  let interrupt: (() => void) | undefined;
  let tick: (() => void) | undefined;
  let clock = 1_000_000;
  const io: CliIo = {
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
    env: { AGENT_URL: 'http://agent', GATEWAY_URL: 'http://gateway', ...NO_STORED_CREDENTIALS },
    fetch: async (url, init) =>
      (url.startsWith('http://agent') ? s.agentApp : s.gatewayApp).request(asLoopback(url), init),
    onInterrupt: (handler) => {
      interrupt = handler;
      return () => {
        interrupt = undefined;
      };
    },
    now: () => clock,
    setInterval: (fn) => {
      tick = fn;
      return 1;
    },
    clearInterval: () => {
      tick = undefined;
    },
    ...opts,
  };
  return {
    io,
    out,
    ctrlC: () => interrupt?.(),
    advance(ms: number) {
      clock += ms;
      tick?.();
    },
  };
}

/** Resolves once `check` holds, polling the event loop (bounded). */
async function until(check: () => boolean) {
  for (let i = 0; i < 2000 && !check(); i++) await new Promise((r) => setImmediate(r));
  expect(check()).toBe(true);
}

async function status(s: Stack, id: string) {
  return (await s.get(s.agentApp, `/agent/tasks/${id}`)).body.status as string;
}

describe('the spinner', () => {
  it('redraws in place with the elapsed time while the model thinks, and clears before each line', async () => {
    const held = heldModel('done thinking');
    stack = await makeStack({ model: held.model, toolsets: SPLIT_TOOLSETS });
    const t = terminal(stack, {
      stderrIsTTY: true,
      env: {
        AGENT_URL: 'http://agent',
        GATEWAY_URL: 'http://gateway',
        NO_COLOR: '1',
        ...NO_STORED_CREDENTIALS,
      },
    });
    const run = main(['run', 'think'], t.io);
    await held.called;
    await until(() => t.out.stderr.includes('thinking…'));
    const drawn = t.out.stderr.length;
    t.advance(1500);
    t.advance(1000);
    const frames = t.out.stderr.slice(drawn);
    expect(frames).toMatch(
      new RegExp(
        `^\\r${ESC}\\[K⠙ step 1 · thinking… 1 tool \\([\\d,]+ tokens\\) · \\d+ message tokens 1\\.5s\\r${ESC}\\[K⠹ step 1 · thinking… .* 2\\.5s$`,
      ),
    );
    held.release();
    expect(await run).toBe(0);
    // The answer's line starts on a cleared line, and the spinner is not drawn again.
    expect(t.out.stderr.slice(drawn + frames.length)).toMatch(new RegExp(`^\\r${ESC}\\[Kstep 1 · model `));
    expect(t.out.stdout).toBe('done thinking\n');
  });
});

describe('Ctrl-C', () => {
  it('asks once; without a second Ctrl-C or an answer it detaches, and the task runs on', async () => {
    const held = heldModel('finished later');
    stack = await makeStack({ model: held.model, toolsets: SPLIT_TOOLSETS });
    const t = terminal(stack, { detachAfterMs: 20 });
    const run = main(['run', 'long job'], t.io);
    await held.called;
    t.ctrlC();
    expect(await run).toBe(130);
    const id = /task (task_[\w-]+)/.exec(t.out.stderr)?.[1] ?? '';
    expect(t.out.stderr).toContain(
      'cancel the task? (the server keeps running it if you detach)\nCtrl-C again cancels it on the server; detaching in 0s otherwise.\n',
    );
    expect(t.out.stderr).toContain(
      `detached: task ${id} keeps running on the server.\n  follow it again: toolshift tasks watch ${id}\n`,
    );
    expect(await status(stack, id)).toBe('running');
    held.release();
    const watched = terminal(stack);
    expect(await main(['tasks', 'watch', id], watched.io)).toBe(0);
    expect(watched.out.stdout).toBe('finished later\n');
  });

  it('cancels the task on the server at the second Ctrl-C and exits 1', async () => {
    const held = heldModel('never');
    stack = await makeStack({ model: held.model, toolsets: SPLIT_TOOLSETS });
    const t = terminal(stack, { detachAfterMs: 60_000 });
    const run = main(['run', 'stop me'], t.io);
    await held.called;
    t.ctrlC();
    t.ctrlC();
    expect(await run).toBe(1);
    const id = /task (task_[\w-]+)/.exec(t.out.stderr)?.[1] ?? '';
    expect(t.out.stderr).toMatch(/cancelling task task_[\w-]+ on the server…\n/);
    expect(t.out.stderr).toMatch(/✘ cancelled in 0 steps/);
    expect(t.out.stderr).toMatch(/error: The task was cancelled by a client/);
    expect(await status(stack, id)).toBe('cancelled');
  });

  it('on a terminal, takes y as cancel and a bare Enter as detach', async () => {
    for (const [typed, code, end] of [
      ['y', 1, 'cancelled'],
      ['', 130, 'running'],
    ] as const) {
      const held = heldModel('x');
      stack = await makeStack({ model: held.model, toolsets: SPLIT_TOOLSETS });
      let asked = false;
      const t = terminal(stack, {
        stdinIsTTY: true,
        readLine: async () => {
          asked = true;
          return typed;
        },
      });
      const run = main(['run', 'ask me'], t.io);
      await held.called;
      t.ctrlC();
      expect(await run).toBe(code);
      expect(asked).toBe(true);
      expect(t.out.stderr).toContain(
        'cancel the task? (the server keeps running it if you detach) [y = cancel, N = detach, Ctrl-C = cancel] ',
      );
      const id = /task (task_[\w-]+)/.exec(t.out.stderr)?.[1] ?? '';
      expect(await status(stack, id)).toBe(end);
      held.release();
      await stack.close();
      stack = undefined;
    }
  });
});
