import { rm } from 'node:fs/promises';
import path from 'node:path';
import { createTokenCounter } from '../lib/telemetry/tokens.ts';
import { armScripts, type PrimedTask, postJson, runArms } from './arms.ts';
import { writeBenchCatalog } from './catalog.ts';
import { type Recall, recallOverHttp } from './discovery.ts';
import { type ArmFigures, economics } from './economics.ts';
import { startMockModel } from './mock-model.ts';
import { startBenchStack } from './stack.ts';
import { benchTasks, primedTask, scriptFor } from './tasks.ts';
import { makeWorkspace, startPages } from './workspace.ts';

// Figures 1–5 in one run: the benchmark catalog behind a real stack, its size, discovery over it, and the
// twelve tasks in the three arms with every model request recorded.

/** What the token-economics run measured. */
export interface TokenRun {
  catalog: { toolsets: number; tools: number; recorded: number; upstream: string[] };
  arms: ArmFigures[];
  recall: Recall;
  problems: string[];
  /** The primed arm: per task, the toolsets activated before its first model call and those it did not need. */
  primed?: PrimedTask[];
  tasks: number;
}

/** Runs it in `dir` (a fresh temp directory). */
export async function tokenRun(dir: string): Promise<TokenRun> {
  const workspace = path.join(dir, 'ws');
  const toolsetsDir = path.join(dir, 'toolsets');
  const pages = await startPages();
  const catalog = await writeBenchCatalog(toolsetsDir);
  const tasks = benchTasks(pages.origin);
  const scripts = armScripts(tasks);
  // The primed arm's model acts on what it finds active at its first turn (tasks.ts primedTask): its script is
  // settled then, from the tools the first request offers (each known by its toolset, from the catalog below).
  const toolsetOf = new Map<string, string>();
  const model = await startMockModel({
    record: true,
    script: (key, turn, offered) => {
      const task = tasks.find((t) => key === `primed:${t.key}`);
      if (task && turn === 0) {
        const active = new Set(offered.flatMap((name) => toolsetOf.get(name) ?? []));
        scripts.set(key, scriptFor(primedTask(task, active), 'primed'));
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
      reset,
    });
    const arms = economics(model.requests, scripts, createTokenCounter());
    return { catalog: size, arms, recall, problems, tasks: tasks.length, primed };
  } finally {
    await stack.close();
    await model.close();
    await catalog.close();
    await pages.close();
  }
}
