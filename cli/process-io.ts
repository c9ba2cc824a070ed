import readline from 'node:readline';
import type { ChatPrompt, CliIo } from './io.ts';

// The CLI's io for a real process: stdout/stderr, the environment, Ctrl-C, and the terminal. Not the `.env`
// of the directory it runs in: any repository can hold one, and it would point the CLI, with the operator's
// tokens, at a listener of its choosing. The daemon reads its own `.env`; the CLI reads where it listens.
//
// While a task is followed on a terminal, the terminal is in raw mode and Ctrl-C arrives as a key, not as a
// signal. A signal goes to the whole foreground process group: under `npx toolshift` that is npm and its
// `sh -c` too, and dash dies of the first Ctrl-C, so npm exited 130 ("detached") whatever the CLI then
// did, and left it running behind the shell's prompt. As a key, only the CLI sees it. SIGINT from `kill`
// (or piped use, where stdin is no terminal) still works.

const CTRL_C = '\x03';
/** Ctrl-\ (quit) and Ctrl-D (end of input) on a raw terminal; both act as Ctrl-C does. */
const INTERRUPT_KEYS = new Set([CTRL_C, '\x1c', '\x04']);

/** The keys of a raw terminal: Ctrl-C to the interrupt handlers, other keys to whoever waits for one. */
function createKeyboard() {
  const stdin = process.stdin;
  const interrupts = new Set<() => void>();
  let waiting: ((key: string) => void) | undefined;
  const onData = (chunk: Buffer) => {
    for (const key of chunk.toString('utf8')) {
      if (INTERRUPT_KEYS.has(key)) for (const handler of [...interrupts]) handler();
      else waiting?.(key);
    }
  };
  const restore = () => {
    if (stdin.isRaw) stdin.setRawMode(false);
  };
  return {
    /** Subscribes to Ctrl-C; the terminal is raw while anyone is subscribed. */
    onInterrupt(handler: () => void): () => void {
      if (interrupts.size === 0) {
        stdin.setRawMode(true);
        stdin.on('data', onData);
        stdin.resume();
        // A crash or process.exit must not leave the user's terminal raw.
        process.once('exit', restore);
      }
      interrupts.add(handler);
      return () => {
        interrupts.delete(handler);
        if (interrupts.size > 0) return;
        stdin.off('data', onData);
        restore();
        stdin.pause();
        process.off('exit', restore);
      };
    },
    /** True while Ctrl-C is a key (someone follows a task). */
    get raw() {
      return interrupts.size > 0;
    },
    /** The next key pressed, echoed; "" for Enter; undefined when `signal` aborts. */
    key(signal: AbortSignal): Promise<string | undefined> {
      return new Promise((resolve) => {
        const done = (key: string | undefined) => {
          waiting = undefined;
          signal.removeEventListener('abort', onAbort);
          if (key !== undefined) process.stderr.write(`${key === '\r' || key === '\n' ? '' : key}\n`);
          resolve(key === '\r' || key === '\n' ? '' : key);
        };
        const onAbort = () => done(undefined);
        if (signal.aborted) return resolve(undefined);
        signal.addEventListener('abort', onAbort, { once: true });
        waiting = done;
      });
    },
  };
}

/** Reads one line from a terminal in its usual (cooked) mode, giving up when `signal` aborts. */
function readCookedLine(signal: AbortSignal): Promise<string | undefined> {
  return new Promise((resolve) => {
    let buffered = '';
    const done = (value: string | undefined) => {
      process.stdin.off('data', onData);
      process.stdin.off('end', onEnd);
      signal.removeEventListener('abort', onAbort);
      process.stdin.pause();
      resolve(value);
    };
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const newline = buffered.indexOf('\n');
      if (newline !== -1) done(buffered.slice(0, newline));
    };
    const onEnd = () => done(undefined);
    const onAbort = () => done(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    process.stdin.on('data', onData);
    process.stdin.on('end', onEnd);
    process.stdin.resume();
  });
}

/**
 * The chat's prompt. On a terminal, a readline for each line (with the history of the chat), closed while a
 * turn runs so the turn's keyboard has the terminal alone; Ctrl-C clears a line, and leaves on an empty one.
 * Piped, one reader for all of stdin, so lines that came in during a turn wait for the next.
 */
function openPrompt(): ChatPrompt {
  let piped: readline.Interface | undefined;
  let lines: AsyncIterator<string> | undefined;
  const history: string[] = [];
  const onTerminal = (prompt: string) =>
    new Promise<string | undefined>((resolve) => {
      const rl = readline.createInterface({
        input: process.stdin,
        output: process.stderr,
        terminal: true,
        history: [...history],
      });
      rl.on('history', (h: string[]) => history.splice(0, history.length, ...h));
      rl.on('SIGINT', () => {
        if (!rl.line) return rl.close();
        rl.write(null, { ctrl: true, name: 'e' });
        rl.write(null, { ctrl: true, name: 'u' });
      });
      let answered = false;
      // Left with Ctrl-C or Ctrl-D: the shell's prompt goes on a line of its own.
      rl.on('close', () => {
        if (!answered) process.stderr.write('\n');
        resolve(undefined);
      });
      rl.question(prompt, (line) => {
        answered = true;
        resolve(line);
        rl.close();
      });
    });
  return {
    async next(prompt) {
      if (process.stdin.isTTY) return onTerminal(prompt);
      piped ??= readline.createInterface({ input: process.stdin, terminal: false });
      lines ??= piped[Symbol.asyncIterator]();
      const next = await lines.next();
      return next.done ? undefined : next.value;
    },
    close() {
      piped?.close();
    },
  };
}

/** All of stdin as text. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A reader that stops early (`toolshift toolsets | head -2`) closes the pipe: the next write fails with EPIPE.
 * Exit quietly as git and gh do, instead of an unhandled 'error' event and a stack trace.
 */
function quietOnClosedPipe(stream: NodeJS.WriteStream): void {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(process.exitCode ?? 0);
  });
}

/** The io of this process. */
export function processIo(): CliIo {
  quietOnClosedPipe(process.stdout);
  quietOnClosedPipe(process.stderr);
  const tty = process.stdin.isTTY === true;
  const keyboard = tty ? createKeyboard() : undefined;
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    env: { ...process.env },
    readStdin,
    openPrompt,
    stderrIsTTY: process.stderr.isTTY === true,
    stdoutIsTTY: process.stdout.isTTY === true,
    stdinIsTTY: tty,
    onInterrupt: (handler) => {
      process.on('SIGINT', handler);
      const offKey = keyboard?.onInterrupt(handler);
      return () => {
        process.off('SIGINT', handler);
        offKey?.();
      };
    },
    // A question while following is answered by one key (y, n, Enter); elsewhere by a line.
    readLine: (signal) => (keyboard?.raw ? keyboard.key(signal) : readCookedLine(signal)),
  };
}
