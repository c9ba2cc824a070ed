import { loadConfig } from './lib/config.ts';
import { runService } from './lib/run-service.ts';
import { startStack } from './start-stack.ts';

// `npm start`: the three services in one process, on the embedded defaults (SQLite, local files).
await runService('toolshift', async () => {
  const { tools, gateway, agent } = await startStack(loadConfig());
  return [tools, gateway, agent];
});
