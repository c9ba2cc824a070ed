import { loadConfig } from './lib/config.ts';
import { runService } from './lib/run-service.ts';
import { startServices, threadsWanted } from './start-threads.ts';

// `npm start`: the three services in one process, on the embedded defaults (SQLite, local files); on a machine
// with more than one core the gateway and the tool-server run on a second thread (TOOLSHIFT_THREADS=1 keeps them on one).
await runService('toolshift', async () => {
  const { tools, gateway, agent } = await startServices(loadConfig(), threadsWanted());
  return [tools, gateway, agent];
});
