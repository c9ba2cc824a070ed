import { startAgentServer } from './agent-server/server.ts';
import type { Config } from './lib/config.ts';
import type { Listening } from './lib/serve.ts';
import { startGateway } from './mcp-gateway/server.ts';
import type { Tool } from './tool-server/kit/define.ts';
import { startToolServer } from './tool-server/server.ts';

/** The three services in one process, each told where the one before it really listens (port 0 works). */
export async function startStack(
  config: Config,
  opts: { extraTools?: readonly Tool[] } = {},
): Promise<{ tools: Listening; gateway: Listening; agent: Listening }> {
  const c = structuredClone(config);
  const tools = await startToolServer(c, opts);
  c.tools.url = tools.url;
  const gateway = await startGateway(c);
  c.gateway.url = gateway.url;
  const agent = await startAgentServer(c);
  return { tools, gateway, agent };
}
