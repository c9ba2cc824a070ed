import { goalMarker, type ScriptedTurn } from './mock-model.ts';
import { ARMS, type Arm, type BenchTask, neededToolsets, scriptFor } from './tasks.ts';

// Runs every task in every arm against a running stack, one task at a time, and checks that each did its
// work: the task completed with the scripted answer and every tool call succeeded. A figure measured on
// tasks that failed would measure nothing.

/** JSON over HTTP, failing loudly on a non-2xx answer. */
// biome-ignore lint/suspicious/noExplicitAny: the answers are read field by field as each route documents them
export async function postJson(url: string, body: unknown): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

// biome-ignore lint/suspicious/noExplicitAny: the answers are read field by field as each route documents them
async function getJson(url: string): Promise<any> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return res.json();
}

/** The key a task's requests carry in one arm. */
export const armKey = (arm: Arm, task: BenchTask) => `${arm}:${task.key}`;

/** The exposure an arm's tasks ask for. */
const exposureOf = (arm: Arm) => (arm === 'dispatch' || arm === 'code' ? arm : 'native');

/** Every arm's script of every task, by key (for the mock model and for the figures). */
export function armScripts(tasks: readonly BenchTask[]): Map<string, ScriptedTurn[]> {
  const scripts = new Map<string, ScriptedTurn[]>();
  for (const arm of ARMS) for (const task of tasks) scripts.set(armKey(arm, task), scriptFor(task, arm));
  return scripts;
}

/** A task of the primed arm: what the agent activated before the first model call, and what of it was not needed. */
export interface PrimedTask {
  task: string;
  primed: string[];
  unneeded: string[];
}

type Event = {
  type: string;
  data: {
    ok?: boolean;
    name?: string;
    output?: unknown;
    primed?: boolean;
    toolset_ids?: string[];
    tool_call_id?: string;
    /** A call a script made: the id of its run_code call. */
    in_script?: string;
  };
};

/**
 * What went wrong in a task's tool calls: every call must succeed, a script's own calls too (their events name
 * the run_code call in `in_script`), and a script that made no call did not do its work.
 */
function callProblems(key: string, events: Event[]): string[] {
  const calls = events.filter((e) => e.type === 'tool_call');
  const problems = calls
    .filter((e) => !e.data.ok)
    .map((e) => {
      const where = e.data.in_script ? ` (in the script of ${e.data.in_script})` : '';
      return `${key}: ${e.data.name}${where} failed: ${String(e.data.output).slice(0, 300)}`;
    });
  for (const run of calls.filter((e) => e.data.name === 'run_code' && e.data.ok)) {
    if (!calls.some((e) => e.data.in_script === run.data.tool_call_id))
      problems.push(`${key}: run_code ${run.data.tool_call_id} made no tool call`);
  }
  return problems;
}

/**
 * Runs the arms; `problems` says what went wrong, one line per problem (empty when every task did its work),
 * `primed` what the primed arm's tasks were given.
 */
export async function runArms(opts: {
  agentUrl: string;
  gatewayUrl: string;
  tasks: readonly BenchTask[];
  /** The arms to run (default: all). */
  arms?: readonly Arm[];
  /** Before each arm: a fresh workspace, so every arm reads the same files. */
  reset: () => Promise<void>;
}): Promise<{ problems: string[]; primed: PrimedTask[] }> {
  const problems: string[] = [];
  const primed: PrimedTask[] = [];
  const { toolsets } = await getJson(`${opts.gatewayUrl}/mcp/admin/toolsets`);
  const everything = (toolsets as { id: string; enabled: boolean }[])
    .filter((t) => t.enabled)
    .map((t) => t.id);
  for (const arm of opts.arms ?? ARMS) {
    await opts.reset();
    for (const task of opts.tasks) {
      const key = armKey(arm, task);
      const request: Record<string, unknown> = {
        goal: `${goalMarker(key)} ${task.goal}`,
        exposure: exposureOf(arm),
        // Only the primed and auto arms start with what discovery is certain of; the others measure the model alone.
        prime: arm === 'primed' || arm === 'auto',
      };
      if (arm === 'all-loaded') {
        // Every toolset active before the task starts: the static tool list of an agent without toolsets.
        request.session_id = `bench-all-${task.key}`;
        await postJson(`${opts.gatewayUrl}/mcp/admin/toolsets`, {
          action: 'ACTIVATE',
          toolset_ids: everything,
          session_id: request.session_id,
        });
      }
      const result = await postJson(`${opts.agentUrl}/agent/execute_task`, request);
      if (result.status !== 'completed' || result.final_answer !== task.answer) {
        problems.push(`${key}: ended ${result.status}${result.error ? ` (${result.error})` : ''}`);
        continue;
      }
      const { events } = await getJson(`${opts.agentUrl}/agent/tasks/${result.task_id}`);
      problems.push(...callProblems(key, events as Event[]));
      if (arm === 'primed') {
        const ids = (events as Event[]).flatMap((e) =>
          e.type === 'toolset_change' && e.data.primed ? (e.data.toolset_ids ?? []) : [],
        );
        const needed = neededToolsets(task);
        primed.push({ task: task.key, primed: ids, unneeded: ids.filter((id) => !needed.has(id)) });
      }
    }
  }
  return { problems, primed };
}
