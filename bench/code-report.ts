import { DATA_CALLS_GOAL, DATA_TOKENS_GOAL, TWELVE_GOAL } from './code-goals.ts';
import type { ArmFigures } from './economics.ts';
import { f2, n0, table, usd } from './format.ts';
import type { TokenRun } from './token-run.ts';

// BENCHMARKS.md's lines on code mode and the data-heavy tasks, in the token-economics section: what the code
// arm does, what the four tasks are, and each arm's input tokens and model calls on the twelve and the four.

/** The lines; none for a report made before the data-heavy tasks were measured. */
export function codeSection(t: TokenRun): string[] {
  const data = t.dataArms;
  if (!data || data.length === 0) return [];
  const byArm = (arms: ArmFigures[], name: string) => arms.find((a) => a.arm === name);
  const names = t.arms.map((a) => a.arm);
  const cell = (arms: ArmFigures[], name: string, f: (a: ArmFigures) => string) => {
    const a = byArm(arms, name);
    return a ? f(a) : '–';
  };
  const row = (label: string, arms: ArmFigures[], f: (a: ArmFigures) => string) => [
    label,
    ...names.map((n) => cell(arms, n, f)),
  ];
  const twelve = `the ${t.tasks} tasks`;
  const four = `${t.dataTasks} data-heavy tasks`;
  const lines = [
    '- Code mode (`code`: `exposure: "code"`): the tools array stays `[manage_toolsets, run_code]`; an ' +
      "activation's result carries TypeScript declarations of the tools it made usable (withdrawn while their toolset " +
      "is inactive), and the model calls them from scripts. On the twelve tasks each reply's tool calls become one `run_code` script making those calls and returning " +
      'their results (bench/code-script.ts), so a task takes as many model calls as in native mode.',
    '- Data-heavy tasks (bench/data-tasks.ts), beside the twelve and measured apart: total the 2026 orders of 30 ' +
      "customers kept as JSON files (the customer list, each one's orders, the prices of the products they name); the " +
      "five largest files across archive/'s folders and their first lines; the links two onboarding guides share on a " +
      'loopback handbook site and which are broken; the ten largest accounts of a sales database joined with a helpdesk ' +
      "database's open tickets by email, and the tickets' messages from files. Each needs three to five dependent rounds " +
      'of tool calls natively (the independent calls of a round in one reply); the code arm writes one script where the ' +
      "goal gives the data's shape, after one small look at the databases' columns where it does not. Every arm gives " +
      'the same answer from the same data.',
    '',
    table(
      ['', ...names],
      [
        row(`input tokens per task, ${twelve}`, t.arms, (a) => n0(a.inputTokensPerTask)),
        row(`model calls per task, ${twelve}`, t.arms, (a) => f2(a.modelCallsPerTask)),
        row(`input tokens per task, ${four}`, data, (a) => n0(a.inputTokensPerTask)),
        row(`model calls per task, ${four}`, data, (a) => f2(a.modelCallsPerTask)),
        row(`tool definitions carried in messages per task, ${four}`, data, (a) =>
          n0(a.definitionsInMessagesPerTask),
        ),
        row(`cost per task with prompt caching, ${four}`, data, (a) => usd(a.costPerTask)),
      ],
    ),
  ];
  const native = byArm(data, 'native');
  const code = byArm(data, 'code');
  if (native && code) {
    lines.push(
      '',
      `Code / native on the data-heavy tasks: input tokens ${f2(code.inputTokensPerTask / native.inputTokensPerTask)}× ` +
        `(goal ≤ ${DATA_TOKENS_GOAL}), model calls ${f2(code.modelCallsPerTask / native.modelCallsPerTask)}× ` +
        `(goal ≤ ${DATA_CALLS_GOAL}); on the twelve the goal is ≤ ${TWELVE_GOAL}× for both (the goals table above).`,
    );
  }
  return lines;
}
