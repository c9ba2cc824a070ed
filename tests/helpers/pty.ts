import { type ChildProcess, spawn } from 'node:child_process';

// A command run on a pseudo-terminal (python3's pty module, no npm package), so it sees a real TTY: isTTY,
// a window size, and Ctrl-C typed as \x03 reaching it as SIGINT through the terminal's line discipline.

const DRIVER = `
import os, pty, select, struct, sys, fcntl, termios
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
inputs = [fd, sys.stdin.fileno()]
while True:
    try:
        ready, _, _ = select.select(inputs, [], [])
    except InterruptedError:
        continue
    if fd in ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        os.write(sys.stdout.fileno(), data)
    if sys.stdin.fileno() in ready:
        data = os.read(sys.stdin.fileno(), 1024)
        if data:
            os.write(fd, data)
        else:
            inputs.remove(sys.stdin.fileno())
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
`;

/** A process on a pseudo-terminal: its output so far, typing into it, and its exit code. */
export interface PtyProcess {
  child: ChildProcess;
  /** Everything written to the terminal so far (stdout and stderr interleaved, \r\n line ends). */
  output(): string;
  /** Resolves once the output matches `pattern` (rejects if the process exits first). */
  waitFor(pattern: RegExp): Promise<void>;
  /** Types `text` on the terminal (\x03 is Ctrl-C). */
  type(text: string): void;
  exited: Promise<number>;
}

/** Runs `command` with `args` on a pseudo-terminal with `env`. */
export function runOnPty(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
): PtyProcess {
  const child = spawn('python3', ['-c', DRIVER, command, ...args], {
    env,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let text = '';
  const waiters: { pattern: RegExp; resolve: () => void; reject: (e: Error) => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (w.pattern.test(text)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  child.stdout?.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    check();
  });
  const exited = new Promise<number>((resolve) => {
    child.on('exit', (code) => {
      for (const w of waiters.splice(0))
        w.reject(new Error(`exited (${code}) before ${w.pattern}; output:\n${text}`));
      resolve(code ?? -1);
    });
  });
  return {
    child,
    output: () => text,
    waitFor: (pattern) =>
      new Promise<void>((resolve, reject) => {
        waiters.push({ pattern, resolve, reject });
        check();
      }),
    type: (t) => child.stdin?.write(t),
    exited,
  };
}
