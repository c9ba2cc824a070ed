import { Worker } from 'node:worker_threads';
import { siblingModule } from '../../lib/config/installation.ts';
import { type JsonInputError, parseJson } from '../../lib/http/json.ts';
import type { CallAnswered, FromWorker, JobGiven, ScriptEnded, ScriptJob } from './limits.ts';

// Runs one run_code script in a worker thread of its own (worker.ts) and answers its tool calls with `call`.
// The worker is made for the run and terminated when it ends, so nothing a script did outlives it; the thread's
// own heap is bounded too, in case the interpreter's limits were ever not enough. Starting a thread and its
// interpreter takes tens of milliseconds, so the next run's is started as a run takes one (a spare, unref'd:
// it keeps no process alive).

let spare: Worker | undefined;

/** Workers that stopped before they were given a script. */
const gone = new WeakSet<Worker>();

function startWorker(): Worker {
  const worker = new Worker(siblingModule(import.meta.url, './worker.ts'), {
    resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
  });
  worker.unref();
  // A spare that failed to start is not given a run; its run, once it has one, hears of its end itself.
  worker.on('error', () => gone.add(worker));
  worker.on('exit', () => gone.add(worker));
  return worker;
}

/** How long a spare waits for a run before it is ended: an idle thread with its interpreter holds ~45 MiB. */
const SPARE_IDLE_MS = 60_000;
let spareTimer: NodeJS.Timeout | undefined;

/** A started worker for a run, and a spare started for the next (ended if no run comes for it). */
function takeWorker(): Worker {
  const worker = spare && !gone.has(spare) ? spare : startWorker();
  const next = startWorker();
  spare = next;
  clearTimeout(spareTimer);
  spareTimer = setTimeout(() => {
    if (spare === next) spare = undefined;
    next.terminate().catch(() => undefined);
  }, SPARE_IDLE_MS);
  spareTimer.unref();
  return worker;
}

/** A tool call's outcome as the script gets it: the value, or the error its call throws. */
export type ToolAnswer = { ok: true; value: unknown } | { ok: false; error: string };

/** How a run ended: what it printed, its value (JSON text), or its error; and how many calls it made. */
export interface ScriptRun {
  output: string;
  truncated: boolean;
  returned?: string;
  error?: { message: string; line?: number };
  /** Calls made. */
  calls: number;
  /** Calls the script asked for and did not wait for, not made because it ended first. */
  abandoned?: number;
}

/**
 * Makes one tool call for the script; `index` numbers the run's calls from 0, and `signal` ends the call when
 * the run ends before it does.
 */
export type ScriptCall = (
  name: string,
  args: Record<string, unknown>,
  index: number,
  signal: AbortSignal,
) => Promise<ToolAnswer>;

/** How long past its computing bound a slice of the script may run before its thread is ended from here. */
const CPU_GRACE_MS = 250;

/** The arguments a script passed, as the object a tool takes, or why not. */
function argumentsOf(name: string, text: string): Record<string, unknown> | string {
  let value: unknown;
  try {
    value = parseJson(text);
  } catch (err) {
    return `the arguments of ${name} must be one JSON object (${(err as JsonInputError).detail ?? String(err)})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return `${name} takes one object of its parameters, as its declaration shows, not ${text.slice(0, 100)}`;
  return value as Record<string, unknown>;
}

/** One run in flight: its worker, its calls, and how it ends (once). */
class Run {
  private readonly worker = takeWorker();
  private readonly calls = new AbortController();
  private asked = 0;
  private made = 0;
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private script: ScriptEnded | undefined;
  private done = false;
  private cpuTimer: NodeJS.Timeout | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort = () => this.end(() => this.reject(this.signal?.reason));

  private readonly job: ScriptJob;
  private readonly call: ScriptCall;
  private readonly signal: AbortSignal | undefined;
  private readonly resolve: (run: ScriptRun) => void;
  private readonly reject: (err: unknown) => void;

  constructor(
    job: ScriptJob,
    call: ScriptCall,
    signal: AbortSignal | undefined,
    resolve: (run: ScriptRun) => void,
    reject: (err: unknown) => void,
  ) {
    this.job = job;
    this.call = call;
    this.signal = signal;
    this.resolve = resolve;
    this.reject = reject;
    this.worker.ref();
    this.timer = setTimeout(
      () => this.failed(`the run took longer than ${job.limits.wallMs / 1000} s in all, tool calls included`),
      job.limits.wallMs,
    );
    signal?.addEventListener('abort', this.onAbort, { once: true });
    if (signal?.aborted) {
      this.onAbort();
      return;
    }
    this.worker.on('message', (m: FromWorker) => this.heard(m));
    this.worker.on('error', (err) => this.failed(`the sandbox stopped: ${err.message}`));
    this.worker.on('exit', (code) =>
      this.failed(`the sandbox exited (code ${code}) before the script ended`),
    );
    this.worker.postMessage({ type: 'job', job } satisfies JobGiven);
  }

  private end(settle: () => void): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    clearTimeout(this.cpuTimer);
    this.waiting.length = 0;
    this.calls.abort(new Error('the run ended'));
    this.signal?.removeEventListener('abort', this.onAbort);
    this.worker.terminate().catch(() => undefined);
    settle();
  }

  private failed(message: string): void {
    const { output = '', truncated = false } = this.script ?? {};
    this.end(() => this.resolve({ output, truncated, error: { message }, calls: this.made }));
  }

  /** The script ended: the run ends once the calls it left in flight have. */
  private settled(): void {
    const over = this.script;
    if (!over || this.running > 0) return;
    const abandoned = this.asked - this.made;
    this.end(() => this.resolve({ ...ended(over, this.made), ...(abandoned > 0 ? { abandoned } : {}) }));
  }

  private answer(a: CallAnswered): void {
    if (!this.done && !this.script) this.worker.postMessage(a);
  }

  private heard(m: FromWorker): void {
    if (this.done) return;
    if (m.type === 'busy') {
      // A slice of the script runs: past its bound (one long operation the interpreter does not interrupt),
      // the thread is ended from here.
      clearTimeout(this.cpuTimer);
      this.cpuTimer = setTimeout(() => this.failed(cpuSpent(this.job.limits.cpuMs)), m.ms + CPU_GRACE_MS);
    } else if (m.type === 'idle') {
      clearTimeout(this.cpuTimer);
    } else if (m.type === 'done') {
      this.script = m;
      this.waiting.length = 0;
      this.settled();
    } else {
      const index = this.asked++;
      const args = argumentsOf(m.name, m.args);
      if (typeof args === 'string') {
        this.answer({ type: 'answer', id: m.id, ok: false, error: args });
        return;
      }
      const go = () => {
        this.run(m.id, m.name, args, index).catch(() => undefined);
      };
      if (this.running < this.job.limits.parallelCalls) go();
      else this.waiting.push(go);
    }
  }

  private async run(id: number, name: string, args: Record<string, unknown>, index: number): Promise<void> {
    this.running += 1;
    this.made += 1;
    try {
      const r = await this.call(name, args, index, this.calls.signal);
      this.answer(
        r.ok
          ? { type: 'answer', id, ok: true, value: r.value === undefined ? '' : JSON.stringify(r.value) }
          : { type: 'answer', id, ok: false, error: r.error },
      );
    } catch (err) {
      this.answer({ type: 'answer', id, ok: false, error: (err as Error).message });
    } finally {
      this.running -= 1;
      if (!this.done && !this.script) this.waiting.shift()?.();
      this.settled();
    }
  }
}

/**
 * Runs `job` to its end: the script's, then that of the calls it left in flight (calls it queued and never
 * waited for are not made). A stopped task (`signal`) ends the run and its calls at once and throws its reason.
 */
export function runScript(job: ScriptJob, call: ScriptCall, signal?: AbortSignal): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    new Run(job, call, signal, resolve, reject);
  });
}

/** What a script that used up its computing time is told. */
export const cpuSpent = (ms: number) =>
  `the script ran longer than its ${ms} ms of computing time (an endless loop?)`;

function ended(m: ScriptEnded, calls: number): ScriptRun {
  return {
    output: m.output,
    truncated: m.truncated,
    ...(m.returned !== undefined ? { returned: m.returned } : {}),
    ...(m.error ? { error: m.error } : {}),
    calls,
  };
}
