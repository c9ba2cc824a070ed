import { loadConfig } from '../lib/config.ts';
import { withCredentials } from '../lib/credentials.ts';
import { runService } from '../lib/run-service.ts';
import { checkPublicBind, readyLine } from './stack.ts';
import { startServices, threadsWanted } from './threads.ts';

// `npm start`: the three services in one process, on the embedded defaults (SQLite, local files); with
// TOOLSHIFT_THREADS=2 the gateway and the tool-server run on a second thread (start/threads.ts). The services
// log where they listen at debug only; this prints the one line a user needs, once Ctrl-C would stop them.
let line = '';
await runService(
  'toolshift',
  async () => {
    const config = withCredentials(loadConfig());
    checkPublicBind(config);
    const { tools, gateway, agent } = await startServices(config, threadsWanted());
    line = readyLine({ agent: agent.url, gateway: gateway.url }, config);
    return [tools, gateway, agent];
  },
  () => process.stderr.write(line),
);
