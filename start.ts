import { loadConfig } from './lib/config.ts';
import { runService } from './lib/run-service.ts';
import { startServices, threadsWanted } from './start-threads.ts';

// `npm start`: the three services in one process, on the embedded defaults (SQLite, local files); with
// TOOLSHIFT_THREADS=2 the gateway and the tool-server run on a second thread (start-threads.ts).
await runService('toolshift', async () => {
  const { tools, gateway, agent } = await startServices(loadConfig(), threadsWanted());
  return [tools, gateway, agent];
});
