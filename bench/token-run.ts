import { rm } from 'node:fs/promises';
import path from 'node:path';
import { createTokenCounter } from '../lib/telemetry/tokens.ts';
import { armScripts, type PrimedTask, postJson, runArms } from './arms.ts';
import { writeBenchCatalog } from './catalog.ts';
import { dataTasks } from './data-tasks.ts';
import { type Recall, recallOverHttp } from './discovery.ts';
import { type ArmFigures, economics } from './economics.ts';
import { startMockModel } from './mock-model.ts';
import { startBenchStack } from './stack.ts';
import { type Arm, benchTasks, directTask, primedTask, scriptFor } from './tasks.ts';
import { makeWorkspace, startPages } from './workspace.ts';

// Figures 1–5 in one run: the benchmark catalog behind a real stack, its size, discovery over it, and the
// twelve tasks and the four data-heavy ones in every arm with every model request recorded.

/** What the token-economics run measured. */
export interface TokenRun {
  catalog: { toolsets: number; tools: number; recorded: number; upstream: string[] };
  /** The figures of the twelve tasks, per arm. */
  arms: ArmFigures[];
  /** The figures of the data-heavy tasks, per arm (absent in reports made before they were measured). */
  dataArms?: ArmFigures[];
  recall: Recall;
  problems: string[];
  /** The primed arm: per task, the toolsets activated before its first model call and those it did not need. */
  primed?: PrimedTask[];
  /** How many of the twelve tasks and of the data-heavy ones ran. */
  tasks: number;
  dataTasks?: number;
}

/** Runs it in `dir` (a fresh temp directory), in every arm or in `arms`. */
export async function tokenRun(dir: string, arms?: readonly Arm[]): Promise<TokenRun> {
  const workspace = path.join(dir, 'ws');
  const toolsetsDir = path.join(dir, 'toolsets');
  const pages = await startPages();
  const catalog = await writeBenchCatalog(toolsetsDir);
  const tasks = [...benchTasks(pages.origin), ...dataTasks(pages.origin)];
  const scripts = armScripts(tasks);
  // The primed arm's model acts on what it finds active at its first turn (tasks.ts primedTask): its script is
  // settled then, from the tools the first request offers (each known by its toolset, from the catalog below).
  const toolsetOf = new Map<string, string>();
  const model = await startMockModel({
    record: true,
    script: (key, turn, offered) => {
      // The auto arm's model is primed too, and calls tools directly (activation without a turn).
      const [arm, taskKey] = key.split(':') as [Arm, string];
      const task = tasks.find((t) => t.key === taskKey);
      if (task && turn === 0 && (arm === 'primed' || arm === 'auto')) {
        const active = new Set(offered.flatMap((name) => toolsetOf.get(name) ?? []));
        const primed = primedTask(task, active);
        scripts.set(key, scriptFor(arm === 'auto' ? directTask(primed) : primed, arm));
      }
      return scripts.get(key)?.[turn];
    },
  });
  const reset = async () => {
    await rm(workspace, { recursive: true, force: true });
    await makeWorkspace(workspace);
    await rm(path.join(dir, 'data', 'memory.jsonl'), { force: true });
  };
  await reset();
  const stack = await startBenchStack({
    dir,
    modelUrl: model.url,
    toolsetsDir,
    workspace,
    env: { FETCH_ALLOW_HOSTS: pages.host },
  });
  try {
    // Every toolset activated once, so each upstream server is connected and its tools listed and indexed.
    const listed = await fetch(`${stack.gatewayUrl}/mcp/admin/toolsets`).then((r) => r.json());
    const ids = (listed.toolsets as { id: string }[]).map((t) => t.id);
    await postJson(`${stack.gatewayUrl}/mcp/admin/toolsets`, {
      action: 'ACTIVATE',
      toolset_ids: ids,
      session_id: 'bench-warm',
    });
    const { toolsets } = await fetch(`${stack.gatewayUrl}/mcp/admin/toolsets`).then((r) => r.json());
    const all = toolsets as { id: string; tools: string[]; description: string; backend?: unknown }[];
    for (const t of all) for (const name of t.tools) toolsetOf.set(name, t.id);
    const size = {
      toolsets: all.length,
      tools: all.reduce((n, t) => n + t.tools.length, 0),
      recorded: all.filter((t) => t.description.includes('Recorded definitions')).length,
      upstream: all.filter((t) => typeof t.backend === 'object').map((t) => t.id),
    };
    const recall = await recallOverHttp(stack.gatewayUrl, size);
    const { problems, primed } = await runArms({
      agentUrl: stack.agentUrl,
      gatewayUrl: stack.gatewayUrl,
      tasks,
      arms,
      reset,
    });
    // The twelve and the data-heavy tasks measured apart: each set's figures are its own tasks' means.
    const heavy = new Set(tasks.filter((t) => t.dataHeavy).map((t) => t.key));
    const isHeavy = (key: string) => heavy.has(key.slice(key.indexOf(':') + 1));
    const counter = createTokenCounter();
    return {
      catalog: size,
      arms: economics(
        model.requests.filter((r) => !isHeavy(r.key)),
        scripts,
        counter,
      ),
      dataArms: economics(
        model.requests.filter((r) => isHeavy(r.key)),
        scripts,
        counter,
      ),
      recall,
      problems,
      tasks: tasks.length - heavy.size,
      dataTasks: heavy.size,
      // What the primed arm was given on the twelve, whose figures its goals judge.
      primed: primed.filter((p) => !heavy.has(p.task)),
    };
  } finally {
    await stack.close();
    await model.close();
    await catalog.close();
    await pages.close();
  }
}
