import { spawn } from 'node:child_process';
import { ToolError } from '../../kit/errors.ts';
import {
  type GitCommand,
  GitFailure,
  type GitOutput,
  type GitSettings,
  type GitTarget,
  gitArgv,
  gitEnv,
  gitLimits,
} from './run.ts';

// Starting one git process (run.ts builds what it is started with): output capped while it streams,
// killed at the deadline, and git's own failures turned into messages the model can act on.

const decoder = new TextDecoder('utf-8');

/** The first lines of git's stderr, enough to say what went wrong. */
function firstLines(text: string): string {
  const lines = text.trim().split('\n').slice(0, 4).join(' ').trim();
  return lines.length > 600 ? `${lines.slice(0, 600)}…` : lines || 'no message';
}

/** Turns git's own failure into a message the model (or the operator) can act on. */
function describeFailure(sub: string, stderr: string): string {
  const dubious = /detected dubious ownership in repository at '([^']*)'/.exec(stderr);
  if (dubious) {
    return (
      `git refuses the repository at ${dubious[1]}: it is owned by another user (git's safe.directory check, ` +
      'which toolshift keeps). An operator who trusts it can run `git config --global --add safe.directory ' +
      `${dubious[1]}\` as the user the tool-server runs as.`
    );
  }
  return `git ${sub} failed: ${firstLines(stderr)}`;
}

/** Bytes of one output stream up to a cap; `over` once more arrived than the cap holds. */
class Capped {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  over = false;

  private readonly cap: number;

  constructor(cap: number) {
    this.cap = cap;
  }

  /** Keeps what fits; false once the cap is exceeded. */
  push(chunk: Buffer): boolean {
    const room = this.cap - this.size;
    if (chunk.length > room) {
      this.over = true;
      if (room > 0) this.chunks.push(chunk.subarray(0, room));
      this.size = this.cap;
      return false;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    return true;
  }

  text(): string {
    return decoder.decode(Buffer.concat(this.chunks));
  }
}

/**
 * Runs one allow-listed git command under the timeout and output cap. spawn, not execFile: only spawn hands
 * the child extra descriptors (target.fds), which is how git gets the directories that were checked.
 */
export function runGit(
  target: GitTarget,
  cmd: GitCommand,
  settings: GitSettings | undefined,
  opts: { maxBytes?: number } = {},
): Promise<GitOutput> {
  const limits = gitLimits(settings);
  const maxBytes = opts.maxBytes ?? limits.maxOutputBytes;
  const argv = gitArgv(target, cmd);
  return new Promise((resolve, reject) => {
    const stdout = new Capped(maxBytes);
    const stderr = new Capped(maxBytes);
    let timedOut = false;
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const child = spawn('git', argv, {
      cwd: target.cwd,
      env: gitEnv(settings, target),
      stdio: ['ignore', 'pipe', 'pipe', ...(target.fds ?? [])],
      windowsHide: true,
      shell: false,
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, limits.timeoutMs);
    child.stdout?.on('data', (chunk: Buffer) => {
      if (!stdout.push(chunk)) child.kill('SIGKILL');
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      if (!stderr.push(chunk)) child.kill('SIGKILL');
    });
    child.on('error', (err: NodeJS.ErrnoException) =>
      settle(() =>
        reject(
          err.code === 'ENOENT'
            ? new ToolError('git is not installed on the tool-server (not found on PATH)')
            : new GitFailure(`git ${cmd.sub} could not be started: ${err.message}`, null, ''),
        ),
      ),
    );
    child.on('close', (code, signal) =>
      settle(() => {
        if (stdout.over) return resolve({ stdout: stdout.text(), truncated: true });
        if (stderr.over) {
          return reject(
            new GitFailure(`git ${cmd.sub} wrote more than ${maxBytes} bytes of errors`, null, ''),
          );
        }
        if (timedOut || signal) {
          return reject(
            new GitFailure(
              `git ${cmd.sub} did not finish within ${limits.timeoutMs} ms and was stopped; ` +
                'narrow the request (a path filter, a smaller limit) or raise GIT_TOOLS_TIMEOUT_MS',
              null,
              stderr.text(),
            ),
          );
        }
        if (code === 0) return resolve({ stdout: stdout.text(), truncated: false });
        const text = stderr.text();
        reject(new GitFailure(describeFailure(cmd.sub, text), code, text));
      }),
    );
  });
}
