import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { siblingModule } from '../../../lib/config/installation.ts';
import { ToolError } from '../../kit/errors.ts';
import { FairQueue } from '../../kit/fair-queue.ts';
import type { DbJob, DbReply } from './ops.ts';

// Runs database jobs off the tool-server's thread, in child processes (worker.ts), with a deadline. A
// statement stuck inside SQLite (a recursive CTE that never ends) does not return to JavaScript, so neither a
// timer in the same thread nor Worker.terminate() can stop it; killing its process does. Processes are reused
// while they behave, so most calls skip the start-up (a Node process, a few hundred ms on a busy machine).

/** Runs jobs with a deadline; the tool-server keeps one (server.ts), a hand-built context gets one per call. */
export interface DbRunner {
  /**
   * The job's result, or a ToolError: the job's own error, or its deadline (the process is then killed).
   * `session`: whose job it is; waiting jobs are served session by session (the one with the fewest running first).
   */
  run(job: DbJob, timeoutMs: number, session?: string): Promise<unknown>;
  /** The pids of the query processes alive now, busy or idle. */
  pids(): number[];
  /** Kills every process and refuses queued jobs; for shutdown and tests. */
  close(): void;
}

/** How many query processes may run at once and how many idle ones are kept warm. */
export interface DbRunnerOptions {
  maxProcesses?: number;
  maxIdle?: number;
  /** Where the child's few variables come from (PATH, HOME, TMPDIR, SQLITE_TMPDIR); process.env by default. */
  env?: Record<string, string | undefined>;
}

/** The variables a query process gets; the service's tokens and keys stay behind. */
const CHILD_ENV_KEYS = ['PATH', 'HOME', 'TMPDIR', 'SQLITE_TMPDIR'] as const;

interface Proc {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<void>;
  stderr: string;
}

interface Pending {
  job: DbJob;
  session: string;
  timeoutMs: number;
  deadline: number;
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
}

function tooSlow(job: DbJob, timeoutMs: number): ToolError {
  if (job.op === 'query') {
    return new ToolError(
      `The query ran longer than ${timeoutMs} ms and was stopped (its process was killed; the database is ` +
        'unchanged). Add a LIMIT, narrow the WHERE, or give a recursive CTE a condition that ends it',
    );
  }
  return new ToolError(`Reading the database took longer than ${timeoutMs} ms and was stopped`);
}

function spawnProc(env: Record<string, string | undefined>): Proc {
  const childEnv: Record<string, string> = {};
  for (const key of CHILD_ENV_KEYS) if (env[key] !== undefined) childEnv[key] = env[key] as string;
  const child = fork(fileURLToPath(siblingModule(import.meta.url, './worker.ts')), [], {
    execArgv: ['--max-old-space-size=512'],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: childEnv,
  });
  const proc: Proc = { child, ready: Promise.resolve(), exited: Promise.resolve(), stderr: '' };
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    proc.stderr = (proc.stderr + chunk).slice(-2000);
  });
  proc.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  proc.ready = new Promise((resolve, reject) => {
    const onMessage = (m: unknown) => {
      if ((m as { ready?: boolean } | null)?.ready) {
        child.off('message', onMessage);
        resolve();
      }
    };
    child.on('message', onMessage);
    // Kept for the process's whole life: an 'error' event without a listener would throw in the tool-server.
    child.on('error', (err) => {
      proc.stderr = `${proc.stderr}\n${err.message}`.slice(-2000);
      reject(err);
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`it exited on start (${signal ?? `code ${code}`}) ${proc.stderr.trim()}`.trim())),
    );
  });
  proc.ready.catch(() => undefined);
  return proc;
}

/** What a job's run needs of its pool: where its process goes afterwards, and what runs next. */
interface Pool {
  queue: FairQueue<Pending>;
  idle: Proc[];
  maxIdle: number;
  closed(): boolean;
  kill(proc: Proc): void;
  replace(): void;
  pump(): void;
}

/** A pool of query processes, started on first use. */
export function createDbRunner(options: DbRunnerOptions = {}): DbRunner {
  const maxProcesses = options.maxProcesses ?? 4;
  const maxIdle = options.maxIdle ?? 1;
  const env = options.env ?? process.env;
  const live = new Set<Proc>();
  const idle: Proc[] = [];
  /** Waiting jobs, handed out session by session (kit/fair-queue.ts). */
  const queue = new FairQueue<Pending>();
  let closed = false;

  const forget = (proc: Proc) => {
    live.delete(proc);
    const at = idle.indexOf(proc);
    if (at !== -1) idle.splice(at, 1);
  };
  const kill = (proc: Proc) => {
    forget(proc);
    proc.child.kill('SIGKILL');
  };

  const start = (): Proc => {
    const proc = spawnProc(env);
    live.add(proc);
    // exited only resolves (on the child's exit); the catch is for the form.
    proc.exited.then(() => forget(proc)).catch(() => {});
    return proc;
  };

  /** After a kill, a fresh idle process starts at once, so the next call does not wait for one. */
  const replace = () => {
    if (closed || idle.length >= maxIdle || live.size >= maxProcesses) return;
    const proc = start();
    proc.child.unref();
    proc.child.channel?.unref();
    idle.push(proc);
  };

  const pool: Pool = { queue, idle, maxIdle, closed: () => closed, kill, replace, pump };

  function pump(): void {
    // Jobs past their deadline leave first, whoever they belong to.
    const now = Date.now();
    for (const item of queue.drop((i) => now >= i.deadline)) item.reject(tooSlow(item.job, item.timeoutMs));
    while (queue.length > 0 && (idle.length > 0 || live.size < maxProcesses)) {
      execute(pool, idle.pop() ?? start(), queue.take() as Pending);
    }
  }

  return {
    run(job, timeoutMs, session = '') {
      if (closed) return Promise.reject(new ToolError('The database tools are shutting down'));
      return new Promise((resolve, reject) => {
        queue.push({ job, session, timeoutMs, deadline: Date.now() + timeoutMs, resolve, reject });
        pump();
      });
    },
    pids: () => [...live].map((p) => p.child.pid).filter((pid): pid is number => pid !== undefined),
    close() {
      closed = true;
      for (const item of queue.clear()) item.reject(new ToolError('The database tools are shutting down'));
      for (const proc of [...live]) kill(proc);
    },
  };
}

/**
 * Runs one job on a process: the process goes back to the idle ones when it answered (and is wanted there), and
 * is killed otherwise (its deadline, an error, an exit), and a fresh one started in its place.
 */
function execute(pool: Pool, proc: Proc, item: Pending): void {
  const { queue, idle } = pool;
  const { child } = proc;
  child.ref();
  child.channel?.ref();
  let settled = false;
  const finish = (keep: boolean, settle: () => void) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    queue.done(item);
    child.off('message', onMessage);
    child.off('exit', onExit);
    if (keep && !pool.closed() && idle.length < pool.maxIdle) {
      child.unref();
      child.channel?.unref();
      idle.push(proc);
      settle();
    } else {
      pool.kill(proc);
      pool.replace();
      // Answer once the process is gone, so a stopped query is really stopped when the caller hears of it.
      const waited = setTimeout(settle, 2000);
      proc.exited
        .then(() => {
          clearTimeout(waited);
          settle();
        })
        .catch(() => {});
    }
    pool.pump();
  };
  const onMessage = (reply: DbReply) => {
    if (reply.ok) finish(true, () => item.resolve(reply.result));
    else if (reply.ok === false) finish(true, () => item.reject(new ToolError(reply.error)));
  };
  const onExit = (code: number | null, signal: string | null) =>
    finish(false, () =>
      item.reject(
        new ToolError(
          `The database process stopped unexpectedly (${signal ?? `code ${code}`})` +
            (proc.stderr.trim() ? `: ${proc.stderr.trim().split('\n').slice(-3).join(' ')}` : ''),
        ),
      ),
    );
  const timer = setTimeout(
    () => finish(false, () => item.reject(tooSlow(item.job, item.timeoutMs))),
    Math.max(0, item.deadline - Date.now()),
  );
  child.on('message', onMessage);
  child.on('exit', onExit);
  proc.ready.then(
    () => {
      if (settled) return;
      try {
        child.send(item.job);
      } catch (err) {
        finish(false, () =>
          item.reject(new ToolError(`The database process is gone: ${(err as Error).message}`)),
        );
      }
    },
    (err: Error) =>
      finish(false, () => item.reject(new ToolError(`Could not start the database process: ${err.message}`))),
  );
}
