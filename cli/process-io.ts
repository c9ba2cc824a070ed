import { readEnv } from '../lib/config.ts';
import type { CliIo } from './io.ts';

// The CLI's io for a real process: stdout/stderr, the environment (and .env), Ctrl-C, and the terminal.

/** Reads one line from the terminal, giving up when `signal` aborts; undefined at end of input. */
function readLine(signal: AbortSignal): Promise<string | undefined> {
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

/** All of stdin as text. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The io of this process. */
export function processIo(): CliIo {
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    env: readEnv(),
    readStdin,
    stderrIsTTY: process.stderr.isTTY === true,
    stdinIsTTY: process.stdin.isTTY === true,
    onInterrupt: (handler) => {
      process.on('SIGINT', handler);
      return () => process.off('SIGINT', handler);
    },
    readLine,
  };
}
