import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Agent, request } from 'undici';
import { CONCURRENCY_TURNS } from './concurrency-script.ts';
import { goalMarker } from './mock-model.ts';
import { type NpmStart, startNpm, startSeparate } from './npm-start.ts';

/** The services run locked, as by default; the benchmark sets the tokens so its clients know them. */
const BENCH_TOKENS = {
  AGENT_API_TOKEN: 'bench-agent-api-token-0001',
  GATEWAY_ADMIN_TOKEN: 'bench-gateway-admin-token-0001',
  GATEWAY_AGENT_TOKEN: 'bench-gateway-agent-token-0001',
  GATEWAY_MCP_TOKEN: 'bench-gateway-mcp-token-0001',
  TOOL_SERVER_TOKEN: 'bench-tool-server-token-0001',
};

import { percentile } from './timing.ts';

// Figures 9 and 11: `npm start` in a child process against a mock model (another process) that answers
// every call after a fixed second. First its resident memory idle; then N tasks at once, each six model turns
// on the file tools; turn throughput in the window where all N are in flight, against the Little's-law ideal
// (N turns in flight, one second each: N turns a second); turn latency from the model's side (the time from a
// task's request to its next one); resident memory while they are held and after they end. The throughput
// window is the middle 80% of the model requests, so the ramp and the tail do not count.

/** Memory of the services' process, in bytes, with Node's own breakdown. */
export interface MemorySnapshot {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** V8 heap spaces, used bytes. */
  spaces: Record<string, number>;
}

/**
 * How the services run: `npm start` (one thread), `npm start` with TOOLSHIFT_THREADS=2 (the gateway and the
 * tool-server on a second thread), or one process each (docker compose).
 */
export type ServicesLayout = 'npm-start' | 'npm-start-http' | 'two-threads' | 'separate' | 'postgres-workers';

/** What the concurrency run measured. */
export interface ConcurrencyRun {
  layout: ServicesLayout;
  /** postgres-workers: how many worker processes ran the tasks. */
  workers?: number;
  tasks: number;
  latencyMs: number;
  turnsPerTask: number;
  completed: number;
  failed: string[];
  windowS: number;
  turnsPerS: number;
  idealTurnsPerS: number;
  turnLatencyP50Ms: number;
  turnLatencyP99Ms: number;
  /** CPU time the services used per model turn over the whole run (all their processes, user and system). */
  cpuMsPerTurn: number;
  wallS: number;
  idle: MemorySnapshot;
  peakRss: number;
  after: MemorySnapshot;
  rssPerHeldTaskBytes: number;
}

async function snapshot(npm: NpmStart): Promise<MemorySnapshot> {
  const m = await npm.metrics();
  const spaces: Record<string, number> = {};
  for (const [key, value] of Object.entries(m)) {
    const space = /^toolshift_nodejs_heap_space_size_used_bytes\{space="(\w+)"\}$/.exec(key)?.[1];
    if (space) spaces[space] = value;
  }
  return {
    rss: npm.rssBytes(),
    heapUsed: m.toolshift_nodejs_heap_size_used_bytes,
    heapTotal: m.toolshift_nodejs_heap_size_total_bytes,
    external: m.toolshift_nodejs_external_memory_bytes,
    spaces,
  };
}

/** Starts the mock model in its own process; a streamed reply's pieces `chunkGapMs` apart. */
export async function startModelProcess(latencyMs: number, chunkGapMs = 0) {
  const child = spawn(process.execPath, [path.resolve('bench/mock-model-main.ts')], {
    env: { ...process.env, MOCK_LATENCY_MS: String(latencyMs), MOCK_CHUNK_GAP_MS: String(chunkGapMs) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line).url));
    child.once('exit', (code) => reject(new Error(`the mock model exited (${code})`)));
  });
  return {
    url,
    async stats(): Promise<{ key: string; turn: number; at: number }[]> {
      const res = await request(url.replace(/\/v1$/, '/stats'));
      return ((await res.body.json()) as { arrivals: { key: string; turn: number; at: number }[] }).arrivals;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * Runs N tasks at once in `dir`. `postgres-workers` runs the agent API and `workers` worker processes on the
 * PostgreSQL database `databaseUrl`, each worker taking an equal share of the tasks at a time. `tuning`: more
 * settings of the services, and the gap between a streamed reply's pieces.
 */
export async function concurrencyRun(
  dir: string,
  tasks = 1000,
  latencyMs = 1000,
  layout: ServicesLayout = 'npm-start',
  scaled?: { databaseUrl: string; workers: number },
  tuning: { env?: Record<string, string>; chunkGapMs?: number } = {},
): Promise<ConcurrencyRun> {
  const workspace = path.join(dir, 'ws');
  await mkdir(workspace, { recursive: true });
  await writeFile(
    path.join(workspace, 'notes.txt'),
    'Meeting notes: ship 1.4.0 on Friday; Ann reviews invoices.\n',
  );
  const model = await startModelProcess(latencyMs, tuning.chunkGapMs);
  const start =
    layout === 'postgres-workers'
      ? (env: Record<string, string>) => startSeparate(env, process.cwd(), scaled?.workers ?? 1)
      : layout === 'separate'
        ? startSeparate
        : startNpm;
  const workers = scaled?.workers ?? 1;
  // The mock model is stopped if the services fail to start (else its process keeps the benchmark alive).
  const npm = await start({
    ...(scaled
      ? {
          DATABASE_URL: scaled.databaseUrl,
          MAX_QUEUED_TASKS: String(tasks * 2),
          MAX_CONCURRENT_TASKS: String(Math.ceil(tasks / workers)),
        }
      : { MAX_CONCURRENT_TASKS: String(tasks * 2) }),
    ...(layout === 'two-threads' ? { TOOLSHIFT_THREADS: '2' } : {}),
    // npm start with its services over loopback HTTP, as before they were linked in-process.
    ...(layout === 'npm-start-http' ? { TOOLSHIFT_LINK: 'http' } : {}),
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'bench',
    TOOLSHIFT_DATA_DIR: path.join(dir, 'data'),
    FS_ROOTS: workspace,
    ...BENCH_TOKENS,
    AGENT_MODEL_TIMEOUT_MS: '120000',
    ...tuning.env,
  }).catch(async (err: unknown) => {
    await model.stop();
    throw err;
  });
  // One connection per task to the agent (each execute_task holds its connection until the task ends).
  const client = new Agent({
    connections: tasks + 10,
    keepAliveTimeout: 60_000,
    headersTimeout: 600_000,
    bodyTimeout: 600_000,
  });
  try {
    await new Promise((r) => setTimeout(r, 2000));
    const idle = await snapshot(npm);
    let peakRss = idle.rss;
    const failed: string[] = [];
    // A service process gone in the middle of the run is a failure of the run, said, not a crash of the bench.
    let vanished: string | undefined;
    const sampler = setInterval(() => {
      try {
        peakRss = Math.max(peakRss, npm.rssBytes());
      } catch (err) {
        vanished ??= (err as Error).message;
      }
    }, 200);
    const cpuBefore = npm.cpuMs();
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: tasks }, async (_, i) => {
        const res = await request(`${npm.agentUrl}/agent/execute_task`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${BENCH_TOKENS.AGENT_API_TOKEN}`,
          },
          body: JSON.stringify({ goal: `${goalMarker(`c${i}`)} read the notes` }),
          dispatcher: client,
        });
        const body = (await res.body.json()) as { status?: string; error?: string };
        if (body.status !== 'completed')
          failed.push(`task ${i}: ${body.status ?? res.statusCode} ${body.error ?? ''}`);
        return body.status === 'completed';
      }),
    );
    const wallS = (performance.now() - started) / 1000;
    const cpuUsed = npm.cpuMs() - cpuBefore;
    clearInterval(sampler);
    if (vanished) failed.push(`a service process exited during the run (${vanished})`);
    const arrivals = await model.stats();
    const byTask = new Map<string, number[]>();
    for (const a of arrivals) {
      const list = byTask.get(a.key) ?? [];
      list[a.turn] = a.at;
      byTask.set(a.key, list);
    }
    const gaps: number[] = [];
    for (const list of byTask.values())
      for (let t = 1; t < list.length; t++) gaps.push(list[t] - list[t - 1]);
    // The middle of the run (from the 10th to the 90th percentile of model requests), leaving out the ramp
    // while the tasks are submitted and the tail while the last ones finish.
    const times = arrivals.map((a) => a.at).sort((a, b) => a - b);
    const from = percentile(times, 0.1);
    const to = percentile(times, 0.9);
    const inWindow = times.filter((t) => t >= from && t <= to).length;
    const windowS = (to - from) / 1000;
    await new Promise((r) => setTimeout(r, 2000));
    const after = await snapshot(npm);
    return {
      layout,
      ...(scaled ? { workers } : {}),
      tasks,
      latencyMs,
      turnsPerTask: CONCURRENCY_TURNS,
      completed: results.filter(Boolean).length,
      failed: failed.slice(0, 10),
      windowS,
      turnsPerS: windowS > 0 ? inWindow / windowS : 0,
      idealTurnsPerS: tasks / (latencyMs / 1000),
      turnLatencyP50Ms: percentile(gaps, 0.5),
      turnLatencyP99Ms: percentile(gaps, 0.99),
      cpuMsPerTurn: cpuUsed / Math.max(1, arrivals.length),
      wallS,
      idle,
      peakRss,
      after,
      rssPerHeldTaskBytes: (peakRss - idle.rss) / tasks,
    };
  } finally {
    await client.close();
    await npm.stop();
    await model.stop();
  }
}
