import type { ArmFigures } from './economics.ts';
import { f2, f3, n0 } from './format.ts';
import type { TokenRun } from './token-run.ts';

// Code mode's claims (issue 38), judged in one run against native mode on the same tasks: on the data-heavy
// tasks a script does in one reply what takes native mode several, so it costs far fewer input tokens and model
// calls; on the twelve ordinary tasks it costs about what native mode does.

/** A line of the summary (goals.ts's Goal). */
interface Goal {
  figure: string;
  measured: string;
  goal: string;
  met: boolean | null;
}

/** Data-heavy tasks: code's input tokens per task / native's, and its model calls per task / native's. */
export const DATA_TOKENS_GOAL = 0.5;
export const DATA_CALLS_GOAL = 0.6;
/** The twelve tasks: code / native, input tokens and model calls alike. */
export const TWELVE_GOAL = 1.05;

/** One comparison of code with native on a set of tasks. */
function compare(
  figure: string,
  what: 'inputTokensPerTask' | 'modelCallsPerTask',
  code: ArmFigures,
  native: ArmFigures,
  goal: number,
): Goal {
  const ratio = code[what] / native[what];
  const shown = what === 'inputTokensPerTask' ? n0 : f2;
  return {
    figure,
    measured: `${f3(ratio)} (${shown(code[what])} vs ${shown(native[what])})`,
    goal: `≤ ${goal}`,
    met: ratio <= goal,
  };
}

/** The code arm's goals; none in a run without it. */
export function codeGoals(t: TokenRun): Goal[] {
  const of = (arms: ArmFigures[] | undefined, name: ArmFigures['arm']) => arms?.find((a) => a.arm === name);
  const native = of(t.arms, 'native');
  const code = of(t.arms, 'code');
  const dataNative = of(t.dataArms, 'native');
  const dataCode = of(t.dataArms, 'code');
  if (!native || !code || !dataNative || !dataCode) return [];
  const data = `${t.dataTasks} data-heavy tasks`;
  return [
    compare(
      `2. Input tokens per task, code / native, ${data}`,
      'inputTokensPerTask',
      dataCode,
      dataNative,
      DATA_TOKENS_GOAL,
    ),
    compare(
      `2. Model calls per task, code / native, ${data}`,
      'modelCallsPerTask',
      dataCode,
      dataNative,
      DATA_CALLS_GOAL,
    ),
    compare(
      `2. Input tokens per task, code / native, the ${t.tasks} tasks`,
      'inputTokensPerTask',
      code,
      native,
      TWELVE_GOAL,
    ),
    compare(
      `2. Model calls per task, code / native, the ${t.tasks} tasks`,
      'modelCallsPerTask',
      code,
      native,
      TWELVE_GOAL,
    ),
    // No goal: what the twelve cost once the provider's prefix cache is counted (code mode's prefix survives
    // toggles; native mode's does not), beside the raw tokens above.
    {
      figure: `2. Cost per task with the prefix cache, code / native, the ${t.tasks} tasks`,
      measured: `${f3(code.costPerTask / native.costPerTask)} ($${code.costPerTask.toFixed(4)} vs $${native.costPerTask.toFixed(4)})`,
      goal: '—',
      met: null,
    },
  ];
}
