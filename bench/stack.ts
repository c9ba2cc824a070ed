import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { loadConfig } from '../lib/config/config.ts';
import { startStack } from '../start/stack.ts';
import type { Tool } from '../tool-server/kit/define.ts';

// The three services started as `npm start` starts them (real HTTP between them, SQLite files, the real
// model client), on ports the system picks, with the benchmark's catalog, workspace and mock model.

/** Where a benchmark stack lives and what it talks to. */
export interface BenchStackOptions {
  dir: string;
  modelUrl: string;
  toolsetsDir: string;
  workspace: string;
  /** Extra environment (e.g. FETCH_ALLOW_HOSTS). */
  env?: Record<string, string>;
  extraTools?: readonly Tool[];
}

/** The environment every benchmark stack runs with: no rate limits in the way of a measurement. */
export function benchEnv(opts: BenchStackOptions): Record<string, string> {
  return {
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: opts.modelUrl,
    OPENAI_API_KEY: 'bench',
    AGENT_MODEL: 'bench',
    // The mock stands for gpt-4.1 (whose prices figure 4 uses): its window, so no single task is compacted (an
    // unknown model's fallback, 8,192 tokens, is less than the all-loaded arm's tool definitions alone).
    AGENT_CONTEXT_TOKENS: '1000000',
    TOOLSHIFT_DATA_DIR: path.join(opts.dir, 'data'),
    TOOLSETS_DIR: opts.toolsetsDir,
    PROMPTS_DIR: path.resolve('prompts'),
    FS_ROOTS: opts.workspace,
    LOG_LEVEL: 'silent',
    AGENT_MAX_STEPS: '50',
    MAX_CALLS_PER_MINUTE: '100000000',
    MAX_ACTIVATIONS_PER_TASK: '1000',
    MAX_CONCURRENT_TASKS: '100000',
    ...opts.env,
  };
}

/** Starts the three services in this process. */
export async function startBenchStack(opts: BenchStackOptions) {
  await mkdir(opts.workspace, { recursive: true });
  const config = loadConfig(benchEnv(opts));
  const { tools, gateway, agent } = await startStack(config, { extraTools: opts.extraTools });
  return {
    agentUrl: agent.url,
    gatewayUrl: gateway.url,
    toolsUrl: tools.url,
    async close() {
      await agent.close();
      await gateway.close();
      await tools.close();
    },
  };
}
