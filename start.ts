import path from 'node:path';
import { loadConfig } from './lib/config.ts';
import { withCredentials } from './lib/credentials.ts';
import { runService } from './lib/run-service.ts';
import { startServices, threadsWanted } from './start-threads.ts';

// `npm start`: the three services in one process, on the embedded defaults (SQLite, local files); with
// TOOLSHIFT_THREADS=2 the gateway and the tool-server run on a second thread (start-threads.ts).
await runService('toolshift', async () => {
  const config = withCredentials(loadConfig());
  const { tools, gateway, agent } = await startServices(config, threadsWanted());
  const file = path.relative(process.cwd(), config.auth.credentialsFile) || config.auth.credentialsFile;
  process.stderr.write(
    `toolshift ready: agent API ${agent.url}, MCP endpoint ${gateway.url}/mcp\n` +
      (config.auth.mode === 'none'
        ? '  TOOLSHIFT_AUTH=none: routes without a configured token are open to every process on this machine\n'
        : `  credentials in ${file} (readable only by you; the CLI reads them): ` +
          `curl -H "Authorization: Bearer $(npx toolshift token)" ${agent.url}/agent/tasks\n`) +
      '  next: npx toolshift toolsets\n',
  );
  return [tools, gateway, agent];
});
