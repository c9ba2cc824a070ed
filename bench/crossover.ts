import { type ArmFigures, PRICE } from './economics.ts';

// Issue 39's figures: the model calls of native with priming and activation without a turn (the `auto` arm)
// against all-loaded, and the catalog size at which managing toolsets starts to save money — exposure auto's
// threshold (AUTO_EXPOSURE_TOKENS, lib/config/config-schema.ts).

/**
 * The tool-definition tokens at which all-loaded costs a task as much as `dynamic`: all-loaded's cost moves with
 * its catalog by that many tokens in each of its requests (cached after the first: every request of the arm
 * carries the same tools first), while the dynamic arm's cost does not depend on the tools it leaves out.
 * Solved on the measured figures, with the cache and without.
 */
export function crossover(all: ArmFigures, dynamic: ArmFigures): { cached: number; uncached: number } {
  const at = (allCost: number, dynCost: number, perM: number) =>
    Math.round(all.toolTokensPerRequest - ((allCost - dynCost) * 1e6) / (all.modelCallsPerTask * perM));
  return {
    cached: at(all.costPerTask, dynamic.costPerTask, PRICE.cachedInputPerM),
    uncached: at(all.costPerTaskUncached, dynamic.costPerTaskUncached, PRICE.inputPerM),
  };
}

const f3 = (n: number) => n.toFixed(3);

/** One line of the summary (goals.ts Goal). */
interface FigureGoal {
  figure: string;
  measured: string;
  goal: string;
  met: boolean | null;
}

/** The auto arm's goals, and the crossover reported (absent in reports made before the arm was measured). */
export function fewestCallsGoals(arms: readonly ArmFigures[], all: ArmFigures): FigureGoal[] {
  const auto = arms.find((x) => x.arm === 'auto');
  if (!auto) return [];
  const calls = auto.modelCallsPerTask / all.modelCallsPerTask;
  const tools = auto.toolTokensPerRequest / all.toolTokensPerRequest;
  const x = crossover(all, auto);
  return [
    {
      figure: '2. Model calls per task, primed with activation without a turn / all-loaded',
      measured: f3(calls),
      goal: '≤ 1.0',
      met: calls <= 1,
    },
    {
      figure: '2. Tool-definition tokens per request, primed with activation without a turn / all-loaded',
      measured: f3(tools),
      goal: '≤ 0.05',
      met: tools <= 0.05,
    },
    {
      figure:
        '2. Crossover: tool-definition tokens at which all-loaded costs as much as dynamic (exposure auto)',
      measured: `${x.cached.toLocaleString('en-US')} with prompt caching, ${x.uncached.toLocaleString('en-US')} without`,
      goal: '(reported)',
      met: null,
    },
  ];
}
