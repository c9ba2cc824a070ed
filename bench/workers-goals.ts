import type { ConcurrencyRun } from './concurrency.ts';
import { f2, ms, n0 } from './format.ts';

// Claims in one statement, judged in one run (issue 34): what a model turn costs the PostgreSQL layout (the
// agent API and its worker processes, every process summed) against `npm start` on SQLite, and what a second
// worker process adds at the same total concurrency. Both are ratios of the same run on the same machine; the
// second means something only with cores for two workers besides the agent API, the gateway and PostgreSQL.

/** A line of the summary (goals.ts's Goal). */
interface Goal {
  figure: string;
  measured: string;
  goal: string;
  met: boolean | null;
}

/** The PostgreSQL layout's CPU per turn (one worker) / SQLite's single process. */
export const CPU_RATIO_GOAL = 1.3;
/** Two workers' turns/s / one worker's, at the same total concurrency. */
export const SCALING_GOAL = 1.6;
/** Below this many cores the scaling is reported, not judged. */
export const SCALING_CORES = 4;

/** The goals of the PostgreSQL worker runs, when the run has them. */
export function workersGoals(sqlite: ConcurrencyRun, variants: ConcurrencyRun[], cores: number): Goal[] {
  const pg = (n: number) =>
    variants.find((v) => v.layout === 'postgres-workers' && v.workers === n && v.tasks === sqlite.tasks);
  const one = pg(1);
  const two = pg(2);
  if (!one) return [];
  const cpuRatio = one.cpuMsPerTurn / sqlite.cpuMsPerTurn;
  const goals: Goal[] = [
    {
      figure: `1. CPU per model turn, PostgreSQL (agent API + 1 worker) / SQLite single process, ${cores} cores`,
      measured:
        `${f2(cpuRatio)} (${ms(one.cpuMsPerTurn)} vs ${ms(sqlite.cpuMsPerTurn)}` +
        (two ? `; 2 workers ${ms(two.cpuMsPerTurn)})` : ')'),
      goal: `≤ ${CPU_RATIO_GOAL}`,
      met: cpuRatio <= CPU_RATIO_GOAL,
    },
  ];
  if (two) {
    const scaling = two.turnsPerS / one.turnsPerS;
    goals.push({
      figure: `9. Two worker processes / one, turns/s at ${n0(sqlite.tasks)} concurrent tasks, ${cores} cores`,
      measured: `${f2(scaling)} (${n0(two.turnsPerS)} vs ${n0(one.turnsPerS)} turns/s)`,
      goal: `≥ ${SCALING_GOAL} with ≥ ${SCALING_CORES} cores`,
      met: cores >= SCALING_CORES ? scaling >= SCALING_GOAL : null,
    });
  }
  return goals;
}
