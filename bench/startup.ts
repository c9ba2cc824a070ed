import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { descendants, freePort, rssOf } from './npm-start.ts';
import { percentile } from './timing.ts';

// Start-up time and idle memory of what `npm start` runs, before and after the loader went: the command the
// script ran until toolshift ran on Node's type stripping (`tsx start/start.ts`: tsx's CLI, which starts Node
// again with its loader, and esbuild transforming every module), and the one it runs now (`node
// bin/toolshift.js serve`). Each run starts on a fresh data directory and free ports and is stopped after its
// idle sample; the two commands alternate so drift on a shared machine falls on both. npm's own process is the
// same for both and is left out: the figures are the command's process tree (tsx's CLI and its child, summed).

/** One way of starting the daemon. */
interface Variant {
  label: string;
  command: string[];
}

export const STARTUP_VARIANTS: Record<'before' | 'after', Variant> = {
  before: { label: 'tsx start/start.ts (before)', command: ['node_modules/.bin/tsx', 'start/start.ts'] },
  after: {
    label: 'node bin/toolshift.js serve (after)',
    command: [process.execPath, 'bin/toolshift.js', 'serve'],
  },
};

/** How long after the ready line the idle memory is read. */
const IDLE_MS = 2_000;

export interface StartupFigures {
  label: string;
  runs: number;
  /** From spawning the command to the ready line, ms: median and the slowest run. */
  readyMs: { median: number; max: number };
  /** Resident memory of the command's process tree, idle 2 s after ready, MiB: median and the largest. */
  idleRssMiB: { median: number; max: number };
}

export interface StartupResults {
  before: StartupFigures;
  after: StartupFigures;
}

/** One start: the time to the ready line and the tree's idle resident memory. */
async function startOnce(variant: Variant, root: string): Promise<{ readyMs: number; rssBytes: number }> {
  const dataDir = await mkdtemp(path.join(root, 'data-'));
  const env = {
    ...process.env,
    TOOLSHIFT_DATA_DIR: dataDir,
    AGENT_PORT: String(await freePort()),
    GATEWAY_PORT: String(await freePort()),
    TOOL_SERVER_PORT: String(await freePort()),
    NO_COLOR: '1',
    LOG_LEVEL: 'warn',
  };
  const started = performance.now();
  const child: ChildProcess = spawn(variant.command[0], variant.command.slice(1), {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const tail: string[] = [];
  try {
    const readyMs = await new Promise<number>((resolve, reject) => {
      const lines = createInterface({ input: child.stderr as NodeJS.ReadableStream });
      lines.on('line', (line) => {
        tail.push(line);
        if (line.startsWith('toolshift ready:')) resolve(performance.now() - started);
      });
      child.once('exit', (code) =>
        reject(new Error(`${variant.label} exited (${code}): ${tail.join('\n')}`)),
      );
      setTimeout(() => reject(new Error(`${variant.label} was not ready within 60 s`)), 60_000).unref();
    });
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const pid = child.pid as number;
    const rssBytes = [pid, ...descendants(pid)].reduce((sum, p) => sum + rssOf(p), 0);
    return { readyMs, rssBytes };
  } finally {
    await new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      process.kill(-(child.pid as number), 'SIGTERM');
    });
    await rm(dataDir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => percentile(xs, 0.5);

/** `runs` starts of each variant, alternating, after one unmeasured start of each (disk caches warm). */
export async function startupRun(runs: number): Promise<StartupResults> {
  const root = await mkdtemp(path.join(tmpdir(), 'toolshift-startup-'));
  try {
    for (const v of Object.values(STARTUP_VARIANTS)) await startOnce(v, root);
    type Sample = { readyMs: number; rssBytes: number };
    const samples: Record<'before' | 'after', Sample[]> = { before: [], after: [] };
    for (let i = 0; i < runs; i++) {
      samples.before.push(await startOnce(STARTUP_VARIANTS.before, root));
      samples.after.push(await startOnce(STARTUP_VARIANTS.after, root));
    }
    const figures = (key: 'before' | 'after'): StartupFigures => {
      const ready = samples[key].map((s) => s.readyMs);
      const rss = samples[key].map((s) => s.rssBytes / 2 ** 20);
      return {
        label: STARTUP_VARIANTS[key].label,
        runs,
        readyMs: { median: median(ready), max: Math.max(...ready) },
        idleRssMiB: { median: median(rss), max: Math.max(...rss) },
      };
    };
    return { before: figures('before'), after: figures('after') };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
