import { startAgentServer } from './agent-server/server.ts';
import { loadConfig } from './lib/config.ts';
import { runService } from './lib/run-service.ts';
import { startGateway } from './mcp-gateway/server.ts';
import { startToolServer } from './tool-server/server.ts';

// `npm start`: the three services in one process, on the embedded defaults (SQLite, local files).
await runService('toolshift', async () => {
  const config = loadConfig();
  const tools = await startToolServer(config);
  const gateway = await startGateway(config);
  const agent = await startAgentServer(config);
  return [tools, gateway, agent];
});
