import type { Action, BenchTask, CodeAction } from './task-types.ts';

// Code mode's replies of a task. A model in code mode reaches tools from scripts (run_code): the tool calls of
// one native reply become one script making those calls (together, as they are independent: one reply's calls
// cannot use each other's results) and returning their results, so it sees what native mode's tool messages
// hold. Tasks that a script does in fewer replies carry their code-mode replies written by hand (task.code).

/** A tool as a script calls it: by its name when that is an identifier, else as `tools["its-name"]`. */
export const scriptName = (tool: string) =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(tool) ? tool : `tools[${JSON.stringify(tool)}]`;

const callText = (a: { tool: string; args: Record<string, unknown> }) =>
  `${scriptName(a.tool)}(${JSON.stringify(a.args)})`;

/** The script of one reply's tool calls. */
function scriptOf(calls: { tool: string; args: Record<string, unknown> }[]): string {
  if (calls.length === 1) return `return await ${callText(calls[0])};`;
  return `return await Promise.all([\n${calls.map((c) => `  ${callText(c)},`).join('\n')}\n]);`;
}

/** One native reply in code mode: its toolset actions in order, its tool calls as one script where the first was. */
function codeReply(actions: Action[]): CodeAction[] {
  const calls = actions.flatMap((a) => ('tool' in a ? [a] : []));
  const reply: CodeAction[] = [];
  for (const a of actions) {
    if (!('tool' in a)) reply.push(a);
    else if (a === calls[0]) reply.push({ run: scriptOf(calls) });
  }
  return reply;
}

/** A task's replies in code mode. */
export function codeTurns(task: BenchTask): CodeAction[][] {
  return task.code ?? task.turns.map(codeReply);
}
