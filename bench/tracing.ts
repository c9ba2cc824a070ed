import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ownTimePerStep, startProbeStack } from './latency-run.ts';
import { percentile } from './timing.ts';

// Figure 15: toolshift's own time per model step (figure 7's measurement) with tracing off and with it on,
// every span sampled (OTEL_TRACES_SAMPLER=always_on) and exported over OTLP/HTTP (protobuf, the default) to a
// receiver on loopback that reads and drops each export. Each run is a process of its own (tracing, once on,
// sets process-wide OpenTelemetry globals), the arms alternating off, on, off, on… so a slow moment of the
// machine falls on both; the figure is the median of the runs of each arm.

/** One arm's run: own time per step and the bare round trip measured beside it. */
export interface TracingArmRun {
  ownMsPerStep: number;
  bareRtt: number;
  steps: number;
  /** Bytes the receiver got (0 with tracing off). */
  exportedBytes: number;
}

export interface TracingRun {
  off: TracingArmRun[];
  on: TracingArmRun[];
  /** Medians over the runs of each arm. */
  offMs: number;
  onMs: number;
  offRtt: number;
  onRtt: number;
  tasks: number;
}

/** A receiver that reads each export whole and answers 200, counting the bytes. */
async function startSink() {
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => {
      bytes += c.length;
    });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bytes: () => bytes,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** One arm in this process (the child's side). */
async function armRun(arm: 'off' | 'on', dir: string, tasks: number): Promise<TracingArmRun> {
  const sink = arm === 'on' ? await startSink() : undefined;
  const probes = await startProbeStack(
    dir,
    sink ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER: 'always_on' } : {},
  );
  try {
    const step = await ownTimePerStep(probes.stack.agentUrl, probes.model, probes.bare.url, tasks);
    // Stopped before the bytes are read: the last batch of spans is sent on stopping.
    await probes.stack.close();
    return {
      ownMsPerStep: step.ownMsPerStep,
      bareRtt: step.bareRtt,
      steps: step.steps,
      exportedBytes: sink?.bytes() ?? 0,
    };
  } finally {
    await probes.close();
    await sink?.close();
  }
}

const median = (xs: number[]) => percentile(xs, 0.5);

/** Figure 15: `runs` runs of each arm, alternating, `tasks` measured tasks each (eight steps a task). */
export async function tracingRun(runs = 3, tasks = 40): Promise<TracingRun> {
  const off: TracingArmRun[] = [];
  const on: TracingArmRun[] = [];
  for (let i = 0; i < runs; i++) {
    for (const arm of ['off', 'on'] as const) {
      const dir = await mkdtemp(path.join(tmpdir(), `toolshift-bench-tracing-${arm}-`));
      try {
        const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), arm, dir, String(tasks)], {
          encoding: 'utf8',
          env: { ...process.env, LOG_LEVEL: 'silent' },
          timeout: 600_000,
        });
        const line = child.stdout.trim().split('\n').at(-1) ?? '';
        if (child.status !== 0 || !line.startsWith('{'))
          throw new Error(`the tracing bench's ${arm} run failed: ${child.stderr.slice(-1500)}`);
        (arm === 'off' ? off : on).push(JSON.parse(line) as TracingArmRun);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
  }
  return {
    off,
    on,
    offMs: median(off.map((r) => r.ownMsPerStep)),
    onMs: median(on.map((r) => r.ownMsPerStep)),
    offRtt: median(off.map((r) => r.bareRtt)),
    onRtt: median(on.map((r) => r.bareRtt)),
    tasks,
  };
}

// Run as a child: `node bench/tracing.ts <off|on> <dir> <tasks>` prints one arm's run as JSON.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [arm, dir, tasks] = process.argv.slice(2);
  const run = await armRun(arm === 'on' ? 'on' : 'off', dir, Number(tasks));
  console.log(JSON.stringify(run));
  process.exit(0);
}
