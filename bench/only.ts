import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { freshDatabase, startTestPostgres } from '../tests/helpers/postgres.ts';
import { checkpointsGoals, checkpointsRun } from './checkpoints.ts';
import { codeGoals } from './code-goals.ts';
import { concurrencyRun, type ServicesLayout } from './concurrency.ts';
import { consoleRun } from './console.ts';
import { crossover } from './crossover.ts';
import { PRICE } from './economics.ts';
import { eventLogRun } from './event-log.ts';
import { pgEventLogRun } from './event-log-pg.ts';
import { replicasRun } from './gateway-replicas.ts';
import { latencyRun } from './latency-run.ts';
import { limitsRun } from './limits.ts';
import { mcpHopRun } from './mcp-hop.ts';
import { ANTHROPIC_PRICE } from './provider-cost.ts';
import { streamingRun } from './streaming.ts';
import { ARMS, type Arm } from './tasks.ts';
import { threadsRun } from './threads.ts';
import { tokenRun } from './token-run.ts';
import { tracingRun } from './tracing.ts';
import { workersGoals } from './workers-goals.ts';

// `npm run bench:one -- <concurrency|latency|replicas|console|tracing|streaming|tokens|mcp-hop|event-log|workers|threads|limits|checkpoints>`: one part of the benchmark, printed as JSON, for working on
// it. BENCH_TASKS (default 1000) and BENCH_LAYOUT (npm-start, two-threads, separate, or postgres-workers with
// BENCH_WORKERS worker processes on a throwaway PostgreSQL) for concurrency, BENCH_ROUNDS for latency, BENCH_ARMS
// for tokens.
const root = await mkdtemp(path.join(tmpdir(), 'toolshift-bench-'));
try {
  const part = process.argv[2] ?? 'concurrency';
  if (part === 'mcp-hop') {
    const r = await mcpHopRun(root, Number(process.env.BENCH_ROUNDS ?? 300));
    console.log(JSON.stringify({ ...r, vsProxy: r.toolshift / r.proxy, vsDirect: r.toolshift / r.direct }));
  } else if (part === 'tokens') {
    // BENCH_ARMS: a comma-separated subset of the arms (default: all).
    const arms = process.env.BENCH_ARMS?.split(',').map((a) => {
      if (!ARMS.includes(a as Arm))
        throw new Error(`BENCH_ARMS: no arm ${JSON.stringify(a)}; the arms are ${ARMS.join(', ')}`);
      return a as Arm;
    });
    const r = await tokenRun(root, arms);
    const all = r.arms.find((a) => a.arm === 'all-loaded');
    const auto = r.arms.find((a) => a.arm === 'auto');
    console.log(
      JSON.stringify({
        problems: r.problems,
        primed: r.primed,
        recall: {
          tune: r.recall.tune,
          heldOut: r.recall.heldOut,
          fresh: r.recall.fresh,
          misses: r.recall.misses.length,
        },
        crossover: all && auto ? crossover(all, auto) : null,
        arms: r.arms.map((a) => ({
          arm: a.arm,
          calls: a.modelCallsPerTask,
          inputTokens: a.inputTokensPerTask,
          callsRatio: all ? a.modelCallsPerTask / all.modelCallsPerTask : null,
          toolTokensRatio: all ? a.toolTokensPerRequest / all.toolTokensPerRequest : null,
          byTask: a.inputTokensByTask,
          // Cost per task at each provider's published prices, with its prompt cache and without.
          cost: {
            [PRICE.model]: {
              cached: a.costPerTask,
              uncached: a.costPerTaskUncached,
              cachedShare: a.cachedShare,
            },
            [ANTHROPIC_PRICE.model]: a.anthropic && {
              cached: a.anthropic.costPerTask,
              uncached: a.anthropic.costPerTaskUncached,
              readShare: a.anthropic.cacheReadShare,
              writeShare: a.anthropic.cacheWriteShare,
            },
          },
        })),
        dataArms: r.dataArms?.map((a) => ({
          arm: a.arm,
          calls: a.modelCallsPerTask,
          inputTokens: a.inputTokensPerTask,
        })),
        codeGoals: codeGoals(r),
      }),
    );
  } else if (part === 'tracing') {
    const r = await tracingRun(Number(process.env.BENCH_RUNS ?? 3));
    console.log(JSON.stringify({ ...r, ratio: r.onMs / r.offMs }));
  } else if (part === 'checkpoints') {
    const r = await checkpointsRun();
    console.log(JSON.stringify({ ...r, goals: checkpointsGoals(r) }));
  } else if (part === 'limits') {
    console.log(JSON.stringify(await limitsRun(Number(process.env.BENCH_ROUNDS ?? 500))));
  } else if (part === 'threads') {
    const r = await threadsRun();
    console.log(JSON.stringify({ ...r, perTurnRatio: r.compactedPerTurn / r.wholePerTurn }));
  } else if (part === 'streaming') {
    const r = await streamingRun(
      root,
      Number(process.env.BENCH_RUNS ?? 3),
      Number(process.env.BENCH_TASKS ?? 200),
    );
    console.log(JSON.stringify({ ...r, ratio: r.onCpuMs / r.offCpuMs }));
  } else if (part === 'event-log') {
    // Figure 10 on both databases.
    const sqlite = await eventLogRun(root);
    const pg = await pgEventLogRun();
    console.log(
      JSON.stringify({
        sqlite: { ...sqlite, ratio: sqlite.storeRecordsPerS / sqlite.rawInsertsPerS },
        postgres: pg.skipped ? pg : { ...pg, ratio: pg.storeRecordsPerS / pg.rawInsertsPerS },
      }),
    );
  } else if (part === 'workers') {
    // Figure 1's PostgreSQL ratio and figure 9's scaling: npm start on SQLite, then the agent API with 1 and 2
    // worker processes on a throwaway PostgreSQL, the same tasks, one run.
    const tasks = Number(process.env.BENCH_TASKS ?? 1000);
    const sqlite = await concurrencyRun(root, tasks);
    const server = await startTestPostgres();
    process.env.TOOLSHIFT_TEST_POSTGRES_URL = server.url;
    const runs = [];
    try {
      for (const workers of [1, 2]) {
        const databaseUrl = await freshDatabase('scaled');
        runs.push(await concurrencyRun(root, tasks, 1000, 'postgres-workers', { databaseUrl, workers }));
      }
    } finally {
      server.stop();
    }
    const brief = (r: typeof sqlite) => ({
      layout: r.layout,
      workers: r.workers,
      cpuMsPerTurn: r.cpuMsPerTurn,
      turnsPerS: r.turnsPerS,
      throughputRatio: r.turnsPerS / r.idealTurnsPerS,
      p99: r.turnLatencyP99Ms,
      failed: r.failed.length,
    });
    console.log(
      JSON.stringify({
        cores: availableParallelism(),
        runs: [sqlite, ...runs].map(brief),
        goals: workersGoals(sqlite, runs, availableParallelism()),
      }),
    );
  } else if (part === 'console') {
    console.log(JSON.stringify(await consoleRun()));
  } else if (part === 'replicas') {
    console.log(JSON.stringify(await replicasRun()));
  } else if (part === 'latency') {
    const r = await latencyRun(root, Number(process.env.BENCH_ROUNDS ?? 400));
    console.log(
      JSON.stringify({
        ...r,
        echoRatio: (r.echo.viaGateway - r.echo.direct) / r.bareRtt,
        delayRatio: r.delay.viaGateway / r.delay.direct,
        stepRatio: r.step.ownMsPerStep / r.step.bareRtt,
        toggleRatio: r.toggle.manage / r.toggle.call,
      }),
    );
  } else {
    const layout = (process.env.BENCH_LAYOUT ?? 'npm-start') as ServicesLayout;
    const server = layout === 'postgres-workers' ? await startTestPostgres() : undefined;
    if (server) process.env.TOOLSHIFT_TEST_POSTGRES_URL = server.url;
    const run = await concurrencyRun(
      root,
      Number(process.env.BENCH_TASKS ?? 1000),
      1000,
      layout,
      server
        ? { databaseUrl: await freshDatabase('scaled'), workers: Number(process.env.BENCH_WORKERS ?? 2) }
        : undefined,
      // BENCH_LINK=http: npm start's services over loopback HTTP instead of in-process (TOOLSHIFT_LINK).
      {
        env: {
          ...(process.env.BENCH_LINK ? { TOOLSHIFT_LINK: process.env.BENCH_LINK } : {}),
          ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
        },
      },
    ).finally(() => server?.stop());
    const { idle, after, ...rest } = run;
    console.log(
      JSON.stringify({
        ...rest,
        throughputRatio: run.turnsPerS / run.idealTurnsPerS,
        idleRss: idle.rss,
        afterRss: after.rss,
      }),
    );
  }
} finally {
  await rm(root, { recursive: true, force: true });
}
process.exit(0);
