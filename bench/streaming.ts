import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { type ConcurrencyRun, concurrencyRun } from './concurrency.ts';
import { f2, ms } from './format.ts';
import { percentile } from './timing.ts';

// Figure 18: the CPU the services spend per model turn with the model's replies streamed (AGENT_MODEL_STREAM
// on, the default) and whole (off). Figure 9's run with fewer tasks: `npm start` against the mock model in its
// own process, every task six turns; streamed, each reply comes in pieces of four characters (a token), each
// piece written on its own a few milliseconds apart after the latency, as a model writes, so every piece is a
// read, a parse and a delta. The arms alternate off, on, off, on… so a slow moment of the machine falls on
// both; the figure is the median of each arm's runs.

/** One arm's run: CPU per turn, and whether every task completed. */
export interface StreamingArmRun {
  cpuMsPerTurn: number;
  turns: number;
  completed: number;
  failed: string[];
}

export interface StreamingRun {
  off: StreamingArmRun[];
  on: StreamingArmRun[];
  /** Medians over the runs of each arm. */
  offCpuMs: number;
  onCpuMs: number;
  tasks: number;
  latencyMs: number;
  chunkGapMs: number;
}

const arm = (r: ConcurrencyRun): StreamingArmRun => ({
  cpuMsPerTurn: r.cpuMsPerTurn,
  turns: r.tasks * r.turnsPerTask,
  completed: r.completed,
  failed: r.failed,
});

/** Figure 18: `runs` runs of each arm, alternating, `tasks` tasks at once in each. */
export async function streamingRun(
  root: string,
  runs = 3,
  tasks = 200,
  latencyMs = 500,
  chunkGapMs = 5,
): Promise<StreamingRun> {
  const off: StreamingArmRun[] = [];
  const on: StreamingArmRun[] = [];
  for (let i = 0; i < runs; i++) {
    for (const stream of [false, true]) {
      const dir = await mkdtemp(path.join(root, `streaming-${stream ? 'on' : 'off'}-`));
      try {
        const run = await concurrencyRun(dir, tasks, latencyMs, 'npm-start', undefined, {
          env: { AGENT_MODEL_STREAM: String(stream) },
          chunkGapMs,
        });
        (stream ? on : off).push(arm(run));
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
  }
  const median = (xs: StreamingArmRun[]) =>
    percentile(
      xs.map((r) => r.cpuMsPerTurn),
      0.5,
    );
  return { off, on, offCpuMs: median(off), onCpuMs: median(on), tasks, latencyMs, chunkGapMs };
}

/** Figure 18's section of BENCHMARKS.md. */
export function streamingSection(s: StreamingRun): string[] {
  const rows = s.off.map((o, i) => {
    const on = s.on[i];
    const done = (r: StreamingArmRun) => `${r.completed}/${s.tasks}`;
    return `| ${i + 1} | ${ms(o.cpuMsPerTurn)} | ${on ? ms(on.cpuMsPerTurn) : '—'} | ${done(o)} / ${on ? done(on) : '—'} |`;
  });
  return [
    '## 18. Streaming off and on',
    '',
    "The services' CPU time per model turn (all their processes, user and system, over the whole run) for " +
      `${s.tasks} tasks at once on \`npm start\`, six turns each, the mock model answering after ${ms(s.latencyMs)} ` +
      `in its own process: ${s.off.length} runs with \`AGENT_MODEL_STREAM=false\` (each reply whole) and ` +
      `${s.on.length} with it on (the default: each reply streamed in pieces of four characters, one write each, ` +
      `${ms(s.chunkGapMs)} apart), alternating (bench/streaming.ts). No one follows the tasks' event streams, so ` +
      'the pieces are read, parsed and put together, and their text gathered for followers that are not there.',
    '',
    '| Run | Off: CPU per turn | On: CPU per turn | Completed (off / on) |',
    '|---|---|---|---|',
    ...rows,
    '',
    `Medians: off ${ms(s.offCpuMs)}, on ${ms(s.onCpuMs)} per turn (${f2(s.onCpuMs / s.offCpuMs)}×).`,
    '',
  ];
}
