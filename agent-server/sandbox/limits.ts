// What a run_code script may use, and the messages between the sandbox's worker and the task that runs it.
// Its own file so the worker loads no more than it needs.

/** The bounds of one script run. Every one ends the run with an error naming it when it is passed. */
export interface ScriptLimits {
  /** QuickJS's heap (its allocator inside the WebAssembly memory). */
  memoryBytes: number;
  /** The interpreter's stack: deep recursion ends at this depth, not at the host's. */
  stackBytes: number;
  /** Time spent running the script's own code, tool calls and sleeps not counted. */
  cpuMs: number;
  /** The whole run, tool calls and sleeps included. */
  wallMs: number;
  /** Tool calls one run may make. */
  calls: number;
  /** Tool calls in flight at once (Promise.all over many records waits its turn). */
  parallelCalls: number;
  /** What the script prints and returns, together. */
  outputBytes: number;
  /** One call's arguments as JSON. */
  argumentBytes: number;
  /** All of a run's sleep() together. */
  sleepMs: number;
}

export const DEFAULT_SCRIPT_LIMITS: ScriptLimits = {
  memoryBytes: 64 * 1024 * 1024,
  stackBytes: 512 * 1024,
  cpuMs: 5_000,
  wallMs: 120_000,
  calls: 200,
  parallelCalls: 4,
  outputBytes: 32 * 1024,
  argumentBytes: 256 * 1024,
  sleepMs: 10_000,
};

/** What the worker is started with. */
export interface ScriptJob {
  code: string;
  /** Each usable tool: its name, and the global function it is (absent: only `tools[name]`). */
  tools: { name: string; alias?: string }[];
  limits: ScriptLimits;
}

/** The task gives a started worker its script. */
export interface JobGiven {
  type: 'job';
  job: ScriptJob;
}

/** The worker asks for a tool call; `args` is the arguments as JSON text. */
export interface CallAsked {
  type: 'call';
  id: number;
  name: string;
  args: string;
}

/** How a script ended: its value (JSON text) or its error (with the script's line when known). */
export interface ScriptEnded {
  type: 'done';
  output: string;
  /** The printed text was cut at the output bound. */
  truncated: boolean;
  returned?: string;
  error?: { message: string; line?: number };
}

/** A slice of the script starts (with the computing time it has left) or ends: the task's watchdog. */
export type SliceMark = { type: 'busy'; ms: number } | { type: 'idle' };

export type FromWorker = CallAsked | ScriptEnded | SliceMark;

/** The task answers a call: the tool's value as JSON text, or why it failed. */
export type CallAnswered = { type: 'answer'; id: number } & (
  | { ok: true; value: string }
  | { ok: false; error: string }
);
