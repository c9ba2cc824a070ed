import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freshDatabase, startTestPostgres } from '../tests/helpers/postgres.ts';
import { checkpointsRun } from './checkpoints.ts';
import { type ConcurrencyRun, concurrencyRun } from './concurrency.ts';
import { consoleRun } from './console.ts';
import { recallAtScale } from './discovery.ts';
import { learnedRecall } from './discovery-learned.ts';
import { eventLogRun } from './event-log.ts';
import { pgEventLogRun } from './event-log-pg.ts';
import { replicasRun } from './gateway-replicas.ts';
import { type BenchResults, goals } from './goals.ts';
import { latencyRun } from './latency-run.ts';
import { limitsRun } from './limits.ts';
import { describeMachine } from './machine.ts';
import { mcpHopRun } from './mcp-hop.ts';
import type { MemoryStage } from './memory-parts.ts';
import { renderReport } from './report.ts';
import { startupRun } from './startup.ts';
import { streamingRun } from './streaming.ts';
import { threadsRun } from './threads.ts';
import { tokenRun } from './token-run.ts';
import { tracingRun } from './tracing.ts';

// `npm run bench`: every figure of the benchmark in one run, offline, then BENCHMARKS.md. Token economics and
// discovery (1–5) on the benchmark catalog with the twelve tasks and four data-heavy ones in five arms; the call path's latency (6–8);
// the event log (10); `npm start` under a thousand concurrent tasks and its memory (9, 11), and the same load
// with fewer tasks, with `npm start` on two threads (TOOLSHIFT_THREADS=2), and with the services as three processes. Environment: BENCH_TASKS (concurrent tasks,
// default 1000), BENCH_FEWER_TASKS (default 200), BENCH_ROUNDS (latency samples, default 400), BENCH_STARTS (starts of each
// command for the start-up figures, default 5), BENCH_STREAMING_RUNS (runs of each arm of figure 18, streaming
// off and on, default 5), BENCH_OUT (the report's path, default BENCHMARKS.md).

function memoryParts(layout: 'one' | 'two'): MemoryStage[] {
  const run = spawnSync(process.execPath, ['--expose-gc', path.resolve('bench/memory-parts.ts'), layout], {
    encoding: 'utf8',
    env: { ...process.env, LOG_LEVEL: 'silent' },
  });
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  if (run.status !== 0 || !line.startsWith('{'))
    throw new Error(`memory-parts failed: ${run.stderr.slice(-1000)}`);
  return (JSON.parse(line) as { stages: MemoryStage[] }).stages;
}

async function main() {
  const started = performance.now();
  const machine = describeMachine();
  const root = await mkdtemp(path.join(tmpdir(), 'toolshift-bench-'));
  const dir = async (name: string) => mkdtemp(path.join(root, `${name}-`));
  const step = (what: string) =>
    console.log(`[bench] ${what} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
  try {
    step(
      'token economics and discovery: 12 tasks and 4 data-heavy ones in every arm on the benchmark catalog',
    );
    const tokens = await tokenRun(await dir('tokens'));
    step('discovery on a catalog of over 200 tools');
    const scale = await recallAtScale();
    step('discovery learning from simulated usage');
    const learned = await learnedRecall();
    step('latency: gateway hop, own time per step, toggle');
    const latency = await latencyRun(await dir('latency'), Number(process.env.BENCH_ROUNDS ?? 400));
    step('event-log persistence');
    const eventLog = await eventLogRun(await dir('events'));
    step('event-log persistence on PostgreSQL');
    const eventLogPg = await pgEventLogRun();
    const tasks = Number(process.env.BENCH_TASKS ?? 1000);
    step(`concurrency: ${tasks} tasks against npm start`);
    const concurrency = await concurrencyRun(await dir('concurrency'), tasks);
    const fewer = Number(process.env.BENCH_FEWER_TASKS ?? 200);
    step(`concurrency: ${fewer} tasks against npm start`);
    const fewerRun = await concurrencyRun(await dir('concurrency'), fewer);
    step(
      `concurrency: ${tasks} tasks against npm start, its services over loopback HTTP (TOOLSHIFT_LINK=http)`,
    );
    const httpLinkRun = await concurrencyRun(await dir('concurrency'), tasks, 1000, 'npm-start-http');
    step(`concurrency: ${tasks} tasks against npm start on two threads`);
    const twoThreadsRun = await concurrencyRun(await dir('concurrency'), tasks, 1000, 'two-threads');
    step(`concurrency: ${tasks} tasks against the three services as separate processes`);
    const separateRun = await concurrencyRun(await dir('concurrency'), tasks, 1000, 'separate');
    const scaledRuns = await postgresWorkersRuns(dir, tasks, step);
    step('gateway replicas on PostgreSQL: DISABLE across replicas, a call on each store');
    const replicas = await replicasRun();
    step("the console's pages with 10,000 tasks and 100,000 audit rows in the stores");
    const consolePages = await consoleRun();
    step('an upstream echo through the MCP face, through mcp-proxy and directly over stdio');
    const mcpHop = await mcpHopRun(await dir('mcp-hop'), Number(process.env.BENCH_ROUNDS ?? 400));
    step('own time per model step with tracing off and on, alternating runs');
    const tracing = await tracingRun(Number(process.env.BENCH_TRACING_RUNS ?? 5));
    step('threads: the prefix across 10 turns, and a 30-turn thread compacted and sent whole');
    const threads = await threadsRun();
    step('CPU per model turn with streaming off and on, alternating runs');
    const streaming = await streamingRun(root, Number(process.env.BENCH_STREAMING_RUNS ?? 5));
    step("users' keys and limits: a key checked, a limit counted, racing replicas");
    const limits = await limitsRun();
    step("checkpoints: the bytes a 20-step task's checkpoints write, whole and appended");
    const checkpoints = await checkpointsRun();
    const startupRuns = Number(process.env.BENCH_STARTS ?? 5);
    step(
      `start-up and idle memory of npm start's command, before and after the loader went: ${startupRuns} starts each`,
    );
    const startup = await startupRun(startupRuns);
    step('memory, stage by stage');
    const memory = memoryParts('one');
    const memoryTwoThreads = memoryParts('two');
    const results: BenchResults = {
      machine,
      durationS: (performance.now() - started) / 1000,
      tokens,
      scale,
      learned,
      latency,
      eventLog,
      eventLogPg,
      concurrency,
      concurrencyVariants: [fewerRun, httpLinkRun, twoThreadsRun, separateRun, ...scaledRuns.runs],
      scaledSkipped: scaledRuns.skipped,
      memory,
      memoryTwoThreads,
      startup,
      replicas,
      console: consolePages,
      tracing,
      mcpHop,
      threads,
      streaming,
      limits,
      checkpoints,
    };
    const out = process.env.BENCH_OUT ?? 'BENCHMARKS.md';
    writeFileSync(out, renderReport(results));
    console.log('');
    for (const g of goals(results)) {
      const mark = g.met === null ? '    ' : g.met ? ' ok ' : 'MISS';
      console.log(`${mark} ${g.figure}: ${g.measured} (goal ${g.goal})`);
    }
    console.log(`\nwrote ${out} in ${Math.round(results.durationS)} s`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** The same tasks with the agent API and 1, then 2, worker processes on a throwaway PostgreSQL cluster. */
async function postgresWorkersRuns(
  dir: (name: string) => Promise<string>,
  tasks: number,
  step: (what: string) => void,
): Promise<{ runs: ConcurrencyRun[]; skipped?: string }> {
  let server: Awaited<ReturnType<typeof startTestPostgres>>;
  try {
    server = await startTestPostgres();
  } catch (err) {
    return { runs: [], skipped: (err as Error).message };
  }
  process.env.TOOLSHIFT_TEST_POSTGRES_URL = server.url;
  try {
    const runs: ConcurrencyRun[] = [];
    for (const workers of [1, 2]) {
      step(`concurrency: ${tasks} tasks, the agent API and ${workers} worker process(es) on PostgreSQL`);
      const databaseUrl = await freshDatabase('scaled');
      runs.push(
        await concurrencyRun(await dir('concurrency'), tasks, 1000, 'postgres-workers', {
          databaseUrl,
          workers,
        }),
      );
    }
    return { runs };
  } finally {
    server.stop();
  }
}

await main();
process.exit(0);
