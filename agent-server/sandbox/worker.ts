import { parentPort } from 'node:worker_threads';
import variant from '@jitl/quickjs-wasmfile-release-sync';
import {
  newQuickJSWASMModuleFromVariant,
  type QuickJSDeferredPromise,
  type QuickJSHandle,
  type QuickJSSyncVariant,
} from 'quickjs-emscripten-core';
import type { CallAnswered, JobGiven, ScriptEnded, ScriptJob, SliceMark } from './limits.ts';

// One run_code script, in QuickJS compiled to WebAssembly, in its own worker thread: the script sees the
// language, its tool functions, console.log and a bounded sleep, nothing of the host (no require, process,
// files, network or clock). Tool calls go to the task as messages and come back as settled promises. The
// interpreter's own limits stop a loop (interrupt), a memory bomb (heap limit) and deep recursion (stack
// limit); a run that passes a bound of its own (calls, output) is stopped by an uncatchable interrupt. The
// task terminates the thread once the run has ended, or when it overstays its wall-clock bound. A thread is
// started ahead, with the interpreter loaded, and waits for its one script.

const port = parentPort as NonNullable<typeof parentPort>;
// The package's types describe its CommonJS face; its default export is the variant itself.
const module = await newQuickJSWASMModuleFromVariant(variant as unknown as QuickJSSyncVariant);
const job = await new Promise<ScriptJob>((resolve) => port.once('message', (m: JobGiven) => resolve(m.job)));
const { limits } = job;

/** What the script sees before its code runs: console, print, sleep, its tools; Date without a clock. */
const PRELUDE = `(() => {
  const call = globalThis.__call, print = globalThis.__print, sleep = globalThis.__sleep;
  delete globalThis.__call; delete globalThis.__print; delete globalThis.__sleep;
  const show = (v) => { if (typeof v === 'string') return v; try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; } catch { return String(v); } };
  const log = (...a) => print(a.map(show).join(' '));
  globalThis.console = Object.freeze({ log, info: log, warn: log, error: log, debug: log });
  globalThis.print = log;
  globalThis.sleep = (ms) => sleep(Math.max(0, Number(ms) || 0));
  const tools = {};
  for (const [name, alias] of TOOLS) {
    const f = async (args) => {
      if (args === undefined) args = {};
      if (typeof args !== 'object' || args === null || Array.isArray(args))
        throw new TypeError(name + ' takes one object of its parameters, as its declaration shows');
      const text = await call(name, JSON.stringify(args));
      return text === '' ? undefined : JSON.parse(text);
    };
    tools[name] = f;
    if (alias) globalThis[alias] = f;
  }
  globalThis.tools = Object.freeze(tools);
  const RealDate = Date;
  const noClock = () => { throw new Error('run_code has no clock: Date.now() and new Date() without a value are not available'); };
  Object.defineProperty(RealDate, 'now', { value: noClock });
  const SafeDate = new Proxy(RealDate, {
    construct(target, args) { if (args.length === 0) noClock(); return Reflect.construct(target, args); },
    apply() { noClock(); },
    get(target, key) { return key === 'now' ? noClock : Reflect.get(target, key); },
  });
  RealDate.prototype.constructor = SafeDate;
  globalThis.Date = SafeDate;
})();`;

/** The script as the body of an async function whose value comes back as JSON text (line 1 is its line 1). */
const wrapped = (code: string) =>
  `(async () => { const v = await (async () => {${code}\n})(); return v === undefined ? undefined : JSON.stringify(v); })()`;

const runtime = module.newRuntime();
runtime.setMemoryLimit(limits.memoryBytes);
runtime.setMaxStackSize(limits.stackBytes);
const vm = runtime.newContext();

let output = '';
let outputBytes = 0;
let truncated = false;
/** Why the run is being stopped: the interrupt handler ends the script at its next check. */
let stopping: string | undefined;
let cpuUsed = 0;
let sliceStart: number | undefined;
let calls = 0;
let sleeping = 0;
let slept = 0;
let nextId = 1;
let ended = false;
const pending = new Map<number, QuickJSDeferredPromise>();

runtime.setInterruptHandler(() => {
  if (stopping) return true;
  if (sliceStart !== undefined && cpuUsed + (performance.now() - sliceStart) > limits.cpuMs) {
    stopping = `the script ran longer than its ${limits.cpuMs} ms of computing time (an endless loop?)`;
    return true;
  }
  return false;
});

/**
 * Runs some of the script, counting the time against its computing bound; the task hears when a slice starts
 * and ends, and ends the thread itself if one outruns the bound (an operation the interpreter does not stop).
 */
function slice<T>(fn: () => T): T {
  port.postMessage({ type: 'busy', ms: Math.max(0, limits.cpuMs - cpuUsed) } satisfies SliceMark);
  sliceStart = performance.now();
  try {
    return fn();
  } finally {
    cpuUsed += performance.now() - sliceStart;
    sliceStart = undefined;
    port.postMessage({ type: 'idle' } satisfies SliceMark);
  }
}

/** `text` cut to at most `bytes` of UTF-8, never inside a character. */
function cutBytes(text: string, bytes: number): string {
  if (Buffer.byteLength(text) <= bytes) return text;
  let lo = 0;
  let hi = Math.min(text.length, bytes);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (Buffer.byteLength(text.slice(0, mid)) <= bytes) lo = mid;
    else hi = mid - 1;
  }
  // A surrogate pair is one character.
  const code = text.charCodeAt(lo - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? lo - 1 : lo);
}

function finish(result: Omit<ScriptEnded, 'type' | 'output' | 'truncated'>): void {
  if (ended) return;
  ended = true;
  port.postMessage({ type: 'done', output, truncated, ...result } satisfies ScriptEnded);
}

/** An error value of the script as a message and, when its stack says so, the script's line. */
function errorOf(handle: QuickJSHandle): { message: string; line?: number } {
  const e = vm.dump(handle) as { name?: unknown; message?: unknown; stack?: unknown } | unknown;
  if (typeof e !== 'object' || e === null) return { message: `the script threw ${String(e)}` };
  const { name, message, stack } = e as { name?: unknown; message?: unknown; stack?: unknown };
  const text = `${typeof name === 'string' ? `${name}: ` : ''}${String(message ?? 'an error without a message')}`;
  const line = typeof stack === 'string' ? /script\.js:(\d+)/.exec(stack)?.[1] : undefined;
  return { message: text.slice(0, 2000), ...(line ? { line: Number(line) } : {}) };
}

function hostFunctions(): void {
  const fns: Record<string, (...args: QuickJSHandle[]) => QuickJSHandle | undefined> = {
    __call: (nameH, argsH) => {
      // A run being stopped makes no more calls: its promise never settles, and the run ends.
      if (stopping) return vm.newPromise().handle;
      const name = vm.getString(nameH);
      const args = vm.getString(argsH);
      calls += 1;
      if (calls > limits.calls) {
        stopping = `the script made more than ${limits.calls} tool calls, the bound of one run`;
        return vm.newPromise().handle;
      }
      const deferred = vm.newPromise();
      if (Buffer.byteLength(args) > limits.argumentBytes) {
        const e = vm.newError(`the arguments of ${name} are over ${limits.argumentBytes} bytes as JSON`);
        deferred.reject(e);
        e.dispose();
        return deferred.handle;
      }
      const id = nextId++;
      pending.set(id, deferred);
      port.postMessage({ type: 'call', id, name, args });
      return deferred.handle;
    },
    __print: (textH) => {
      if (stopping) return undefined;
      const text = `${vm.getString(textH)}\n`;
      const bytes = Buffer.byteLength(text);
      if (outputBytes + bytes > limits.outputBytes) {
        output += cutBytes(text, limits.outputBytes - outputBytes);
        outputBytes = Buffer.byteLength(output);
        truncated = true;
        stopping = `the script printed more than ${limits.outputBytes} bytes; print less (a total, the rows that matter)`;
        return undefined;
      }
      output += text;
      outputBytes += bytes;
      return undefined;
    },
    __sleep: (msH) => {
      if (stopping) return vm.newPromise().handle;
      const ms = vm.getNumber(msH);
      const deferred = vm.newPromise();
      if (slept + ms > limits.sleepMs) {
        const e = vm.newError(`sleep() past the run's ${limits.sleepMs} ms of sleeping in all`);
        deferred.reject(e);
        e.dispose();
        return deferred.handle;
      }
      slept += ms;
      sleeping += 1;
      setTimeout(() => {
        sleeping -= 1;
        deferred.resolve();
        deferred.dispose();
        step();
      }, ms);
      return deferred.handle;
    },
  };
  for (const [name, fn] of Object.entries(fns)) {
    const h = vm.newFunction(name, fn);
    vm.setProp(vm.global, name, h);
    h.dispose();
  }
}

let promise: QuickJSHandle | undefined;

/** Runs the jobs a settled call or sleep let go, then ends the run if it is over. */
function step(): void {
  if (ended) return;
  const jobs = slice(() => runtime.executePendingJobs());
  if (jobs.error) {
    const error = errorOf(jobs.error);
    jobs.error.dispose();
    finish({ error: stopping ? { message: stopping } : error });
    return;
  }
  check();
}

function check(): void {
  if (stopping) {
    finish({ error: { message: stopping } });
    return;
  }
  if (!promise) return;
  const state = vm.getPromiseState(promise);
  if (state.type === 'fulfilled') {
    const value = vm.typeof(state.value) === 'string' ? vm.getString(state.value) : undefined;
    state.value.dispose();
    // The value shares the output's bound with what was printed.
    const room = Math.max(0, limits.outputBytes - outputBytes);
    if (value !== undefined && Buffer.byteLength(value) > room) {
      truncated = true;
      finish({ returned: `${cutBytes(value, room)}…` });
      return;
    }
    finish(value === undefined ? {} : { returned: value });
    return;
  }
  if (state.type === 'rejected') {
    const error = errorOf(state.error);
    state.error.dispose();
    finish({ error });
    return;
  }
  if (pending.size === 0 && sleeping === 0) {
    finish({
      error: { message: 'the script waits on a promise nothing will settle (no tool call or sleep is left)' },
    });
  }
}

port.on('message', (answer: CallAnswered) => {
  const deferred = pending.get(answer.id);
  if (!deferred || ended) return;
  pending.delete(answer.id);
  if (answer.ok) {
    const h = vm.newString(answer.value);
    deferred.resolve(h);
    h.dispose();
  } else {
    const e = vm.newError(answer.error);
    deferred.reject(e);
    e.dispose();
  }
  deferred.dispose();
  step();
});

hostFunctions();
const tools = JSON.stringify(job.tools.map((t) => [t.name, t.alias ?? null]));
const prelude = vm.evalCode(
  PRELUDE.replace('TOOLS', () => tools),
  'prelude.js',
);
if (prelude.error) {
  finish({ error: errorOf(prelude.error) });
} else {
  prelude.value.dispose();
  const started = slice(() => vm.evalCode(wrapped(job.code), 'script.js'));
  if (started.error) {
    const error = errorOf(started.error);
    started.error.dispose();
    finish({ error: stopping ? { message: stopping } : error });
  } else {
    promise = started.value;
    step();
  }
}
