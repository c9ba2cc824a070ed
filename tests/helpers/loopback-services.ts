import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startStack } from '../../start/stack.ts';
import { MODEL_BASE_URL } from './msw.ts';

// The three services on loopback in this process, locked off (no tokens: a test's CLI child reaches them by
// AGENT_URL and GATEWAY_URL), the model at msw's edge (MODEL_BASE_URL), goal priming off; and the environment a
// `toolshift` child process runs in against them (its HOME the temp dir, a terminal that takes colour).

export async function startLoopbackServices(name: string) {
  const tmp = await mkdtemp(path.join(tmpdir(), `toolshift-${name}-`));
  await mkdir(path.join(tmp, 'workspace'));
  const config = loadConfig({
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    OPENAI_BASE_URL: MODEL_BASE_URL,
    OPENAI_API_KEY: 'test-key',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    FS_ROOTS: path.join(tmp, 'workspace'),
    LOG_LEVEL: 'silent',
    AGENT_PRIME_TOOLSETS: 'false',
  });
  const { tools, gateway, agent } = await startStack(config);
  const services: Listening[] = [agent, gateway, tools];
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: tmp,
    TERM: 'xterm-256color',
    AGENT_URL: agent.url,
    GATEWAY_URL: gateway.url,
  };
  return {
    tmp,
    agentUrl: agent.url,
    env,
    async close() {
      for (const s of services) await s.close();
      await rm(tmp, { recursive: true, force: true });
    },
  };
}
