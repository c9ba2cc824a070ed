import { type ChildProcess, spawn } from 'node:child_process';
import {
  deserializeMessage,
  type JSONRPCMessage,
  serializeMessage,
  type Transport,
} from '@modelcontextprotocol/client';
import { LineSplitter, MessageTooLargeError } from './message-limit.ts';

// The SDK's StdioClientTransport always adds LOGNAME, SHELL, TERM and USER to a child's environment and
// starts it in the gateway's process group. This one gives the child exactly the environment it is
// handed, its own process group (so stopping it also stops what it spawned, e.g. npx → node), and keeps
// the tail of its stderr so a crash can be reported with the server's own last words.
//
// Nothing a child sends can reach the process as an exception (an upstream is untrusted). The listeners
// this transport installs, and why none of them can throw:
// - child 'error' (spawn failure, a signal that cannot be sent): rejects start() or goes to onerror.
// - child 'exit' / 'close': record how it ended and call onclose (the connection marks it down).
// - stdin 'error' (EPIPE when the child died): to onerror; send() rejects on its own.
// - stdout 'data': bytes go to a LineSplitter with a cap (UPSTREAM_MAX_MESSAGE_BYTES); a line over it stops
//   the child and is reported, a line that is not a JSON-RPC message goes to onerror, and the SDK's
//   onmessage runs inside try/catch, so a throwing handler is reported instead of escaping the listener.
//   (The SDK's ReadBuffer threw from append() past 10 MiB, inside this listener: that killed the daemon.)
//   Any other error while splitting (a line V8 cannot hold as a string) stops the child the same way.
// - stdout/stderr 'error': to onerror. stderr 'data': a bounded tail (2 KiB), no parsing.
// - stdin 'drain' / child 'close' while send() waits on a full pipe: settle that promise (a child that
//   died never drains, and its call would otherwise wait for its timeout).
// - The handlers these call (the SDK's onmessage / onerror / onclose, the connection's onOverflow) each run
//   inside try/catch (report()), so even a handler that throws stays inside this transport.

/** How to start one stdio MCP server. */
export interface StdioParams {
  command: string;
  args: string[];
  /** The child's whole environment: nothing is inherited beyond this. */
  env: Record<string, string>;
  cwd?: string;
  /** The largest message (one line) the child may send; past it the child is stopped. Default 16 MiB. */
  maxMessageBytes?: number;
}

const STDERR_TAIL_BYTES = 2048;

/** A stdio client transport over a child process in its own process group. */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Told when the child sent a message over the cap (the child is being stopped). */
  onOverflow?: (error: MessageTooLargeError) => void;
  private child?: ChildProcess;
  private readonly lines: LineSplitter;
  private stderrTail = '';
  private exitInfo?: string;
  /** Why this transport stopped the child itself (a message over the cap), for the call's error. */
  private stopReason?: string;

  private readonly params: StdioParams;

  constructor(params: StdioParams) {
    this.params = params;
    this.lines = new LineSplitter(params.maxMessageBytes ?? 16 * 1024 * 1024);
  }

  /** The child's pid while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last lines the child wrote to stderr, and how it exited, for error messages. */
  describeExit(): string {
    const tail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
    return [this.stopReason, this.exitInfo, tail ? `stderr: ${tail}` : ''].filter(Boolean).join('; ');
  }

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.params.command, this.params.args, {
        env: this.params.env,
        cwd: this.params.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        shell: false,
      });
      this.child = child;
      child.once('error', (err) => {
        reject(err);
        this.report(err);
      });
      child.once('spawn', () => resolve());
      child.once('exit', (code, signal) => {
        this.exitInfo = signal ? `killed by ${signal}` : `exited with code ${code}`;
      });
      child.once('close', () => {
        this.child = undefined;
        try {
          this.onclose?.();
        } catch (err) {
          this.report(err as Error);
        }
      });
      child.stdin?.on('error', (err) => this.report(err));
      child.stdout?.on('error', (err) => this.report(err));
      child.stderr?.on('error', (err) => this.report(err));
      child.stdout?.on('data', (chunk: Buffer) => this.receive(chunk));
      child.stderr?.on('data', (chunk: Buffer) => {
        this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
      });
    });
  }

  /** Bytes from the child's stdout: whole lines become messages; a line over the cap stops the child. */
  private receive(chunk: Buffer) {
    let lines: string[];
    try {
      lines = this.lines.push(chunk);
    } catch (err) {
      // Over the cap; or, with a cap set near V8's largest string, a line that cannot be decoded at all.
      // Either way the stream is out of step: stop the child rather than let the error leave this listener.
      const error =
        err instanceof MessageTooLargeError
          ? err
          : new Error(`the server sent a line that could not be read (${(err as Error).message})`);
      this.stopReason = error.message;
      this.kill();
      if (!(error instanceof MessageTooLargeError)) this.report(error);
      else {
        try {
          this.onOverflow?.(error);
        } catch (err) {
          this.report(err as Error);
        }
      }
      return;
    }
    for (const line of lines) {
      let message: JSONRPCMessage;
      try {
        message = deserializeMessage(line);
      } catch (err) {
        this.report(
          new Error(`the server sent a line that is not a JSON-RPC message: ${(err as Error).message}`),
        );
        continue;
      }
      try {
        this.onmessage?.(message);
      } catch (err) {
        this.report(err as Error);
      }
    }
  }

  /** Hands an error to onerror; a handler that throws is ignored (no listener of a child may throw). */
  private report(error: Error) {
    try {
      this.onerror?.(error);
    } catch {
      // nothing left to tell: the error was the report
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin;
      if (!stdin || stdin.destroyed) {
        reject(
          new Error(`the server process is not running${this.exitInfo ? ` (${this.describeExit()})` : ''}`),
        );
        return;
      }
      if (stdin.write(serializeMessage(message))) return resolve();
      // A full pipe: wait for it to drain, but not past the child's end (it would never drain then).
      const child = this.child;
      const settle = () => {
        stdin.off('drain', settle);
        child?.off('close', settle);
        if (stdin.writableNeedDrain) reject(new Error(`the server process stopped (${this.describeExit()})`));
        else resolve();
      };
      stdin.once('drain', settle);
      child?.once('close', settle);
    });
  }

  /** Closes stdin, then signals the process group: SIGTERM after 2 s, SIGKILL after 2 s more. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const closed = new Promise<void>((done) => child.once('close', () => done()));
    const wait = (ms: number) =>
      Promise.race([
        closed.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref()),
      ]);
    child.stdin?.end();
    if (await wait(2000)) return;
    signalGroup(child, 'SIGTERM');
    if (await wait(2000)) return;
    signalGroup(child, 'SIGKILL');
    await closed;
  }

  /** Stops the process group at once (a hung server: there is nothing to wait for). */
  kill(): void {
    if (this.child) signalGroup(this.child, 'SIGKILL');
  }
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals) {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {
    child.kill(signal);
  }
}
