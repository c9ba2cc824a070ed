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

function startWorker(): Worker {
  const worker = new Worker(siblingModule(import.meta.url, './worker.ts'), {
    resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
  });
  worker.unref();
  // A spare that failed to start fails its run, which says why; until then nobody listens.
  worker.on('error', () => undefined);
  return worker;
}

/** A started worker for a run, and a spare started for the next. */
function takeWorker(): Worker {
  const worker = spare ?? startWorker();
  spare = startWorker();
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
  calls: number;
}

/** Makes one tool call for the script; `index` numbers the run's calls from 0. */
export type ScriptCall = (name: string, args: Record<string, unknown>, index: number) => Promise<ToolAnswer>;

/** The arguments a script passed, as the object a tool takes, or why not. */
function argumentsOf(name: string, text: string): Record<string, unknown> | string {
  let value: unknown;
  try {
    value = parseJson(text);
  } catch (err) {
    return `the arguments of ${name} could not be read (${(err as JsonInputError).detail ?? String(err)})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return `${name} takes one object of its parameters, as its declaration shows, not ${text.slice(0, 100)}`;
  return value as Record<string, unknown>;
}

/** Runs `job` to its end; a stopped task (`signal`) ends the run at once and throws its reason. */
export function runScript(job: ScriptJob, call: ScriptCall, signal?: AbortSignal): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const worker = takeWorker();
    worker.ref();
    let calls = 0;
    let running = 0;
    const waiting: (() => void)[] = [];
    let done = false;
    const end = (settle: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      worker.terminate().catch(() => undefined);
      settle();
    };
    const failed = (message: string) =>
      end(() => resolve({ output: '', truncated: false, error: { message }, calls }));
    const onAbort = () => end(() => reject(signal?.reason));
    const timer = setTimeout(
      () => failed(`the run took longer than ${job.limits.wallMs / 1000} s in all, tool calls included`),
      job.limits.wallMs,
    );
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) return onAbort();

    const answer = (a: CallAnswered) => {
      if (!done) worker.postMessage(a);
    };
    const run = async (id: number, name: string, args: Record<string, unknown>, index: number) => {
      running += 1;
      try {
        const r = await call(name, args, index);
        answer(
          r.ok
            ? { type: 'answer', id, ok: true, value: r.value === undefined ? '' : JSON.stringify(r.value) }
            : { type: 'answer', id, ok: false, error: r.error },
        );
      } catch (err) {
        answer({ type: 'answer', id, ok: false, error: (err as Error).message });
      } finally {
        running -= 1;
        waiting.shift()?.();
      }
    };
    worker.on('message', (m: FromWorker) => {
      if (m.type === 'done') return end(() => resolve(ended(m, calls)));
      const index = calls++;
      const args = argumentsOf(m.name, m.args);
      if (typeof args === 'string') return answer({ type: 'answer', id: m.id, ok: false, error: args });
      const go = () => {
        run(m.id, m.name, args, index).catch(() => undefined);
      };
      if (running < job.limits.parallelCalls) go();
      else waiting.push(go);
    });
    worker.on('error', (err) => failed(`the sandbox stopped: ${err.message}`));
    worker.on('exit', (code) => failed(`the sandbox exited (code ${code}) before the script ended`));
    worker.postMessage({ type: 'job', job } satisfies JobGiven);
  });
}

function ended(m: ScriptEnded, calls: number): ScriptRun {
  return {
    output: m.output,
    truncated: m.truncated,
    ...(m.returned !== undefined ? { returned: m.returned } : {}),
    ...(m.error ? { error: m.error } : {}),
    calls,
  };
}
