import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from '../telemetry/log.ts';

// Retention: without it audit rows, tasks, events, approvals and sessions grow for ever. Each service hands
// its stores' delete-a-batch functions to one sweeper, run once at start and then on an unref'd timer. A
// batch deletes a few hundred rows in one statement (milliseconds) and the sweep yields to the event loop
// between batches, so requests keep being served while a large backlog is worked off.

/** One kind of row to prune: `step` deletes at most `limit` of them and says how many it deleted. */
export interface RetentionRule {
  /** The table (or kind of row) it prunes, for the log and the counts. */
  name: string;
  step(limit: number, now: number): number | Promise<number>;
  /** Rows per batch when the rows are heavier than usual (a task takes its events with it). */
  batch?: number;
}

export interface Retention {
  /** Runs every rule to completion now (or waits for a sweep already running); rows deleted per rule. */
  runOnce(now?: number): Promise<Record<string, number>>;
  /** Stops the timer and waits for a sweep in progress to end (before the database is closed). */
  stop(): Promise<void>;
}

/** Rows one statement deletes: large enough to keep up with any load, small enough to be a few milliseconds. */
export const RETENTION_BATCH = 500;

/** Starts the sweeper: a first sweep on the next turn of the event loop, then one every `intervalMs`. */
export function startRetention(
  rules: readonly RetentionRule[],
  opts: { intervalMs: number; log?: Logger; now?: () => number },
): Retention {
  const clock = opts.now ?? Date.now;
  let running: Promise<Record<string, number>> | null = null;
  let stopped = false;

  const sweep = async (now: number): Promise<Record<string, number>> => {
    const deleted: Record<string, number> = {};
    for (const rule of rules) {
      const limit = rule.batch ?? RETENTION_BATCH;
      let total = 0;
      try {
        while (!stopped) {
          const n = await rule.step(limit, now);
          total += n;
          if (n < limit) break;
          await nextTurn();
        }
      } catch (err) {
        // A locked or closed database must not take the service down; the next sweep tries again.
        opts.log?.warn({ err, rule: rule.name }, 'retention sweep failed');
      }
      deleted[rule.name] = total;
    }
    if (Object.values(deleted).some((n) => n > 0)) opts.log?.info({ deleted }, 'retention: old rows deleted');
    return deleted;
  };

  const runOnce = (now = clock()): Promise<Record<string, number>> => {
    running ??= sweep(now).finally(() => {
      running = null;
    });
    return running;
  };

  const first = setTimeout(() => void runOnce(), 0);
  first.unref();
  const timer = setInterval(() => void runOnce(), opts.intervalMs);
  timer.unref();
  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(first);
      clearInterval(timer);
      await running;
    },
  };
}
