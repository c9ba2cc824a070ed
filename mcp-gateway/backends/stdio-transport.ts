import { type ChildProcess, spawn } from 'node:child_process';
import {
  type JSONRPCMessage,
  ReadBuffer,
  serializeMessage,
  type Transport,
} from '@modelcontextprotocol/client';

// The SDK's StdioClientTransport always adds LOGNAME, SHELL, TERM and USER to a child's environment and
// starts it in the gateway's process group. This one gives the child exactly the environment it is
// handed, its own process group (so stopping it also stops what it spawned, e.g. npx → node), and keeps
// the tail of its stderr so a crash can be reported with the server's own last words.

/** How to start one stdio MCP server. */
export interface StdioParams {
  command: string;
  args: string[];
  /** The child's whole environment: nothing is inherited beyond this. */
  env: Record<string, string>;
  cwd?: string;
}

const STDERR_TAIL_BYTES = 2048;

/** A stdio client transport over a child process in its own process group. */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child?: ChildProcess;
  private readonly buffer = new ReadBuffer();
  private stderrTail = '';
  private exitInfo?: string;

  constructor(private readonly params: StdioParams) {}

  /** The child's pid while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last lines the child wrote to stderr, and how it exited, for error messages. */
  describeExit(): string {
    const tail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
    return [this.exitInfo, tail ? `stderr: ${tail}` : ''].filter(Boolean).join('; ');
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
        this.onerror?.(err);
      });
      child.once('spawn', () => resolve());
      child.once('exit', (code, signal) => {
        this.exitInfo = signal ? `killed by ${signal}` : `exited with code ${code}`;
      });
      child.once('close', () => {
        this.child = undefined;
        this.onclose?.();
      });
      child.stdin?.on('error', (err) => this.onerror?.(err));
      child.stdout?.on('data', (chunk: Buffer) => {
        this.buffer.append(chunk);
        for (;;) {
          let message: JSONRPCMessage | null;
          try {
            message = this.buffer.readMessage();
          } catch (err) {
            this.onerror?.(err as Error);
            continue;
          }
          if (message === null) break;
          this.onmessage?.(message);
        }
      });
      child.stderr?.on('data', (chunk: Buffer) => {
        this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
      });
    });
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
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', () => resolve());
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
