import { type Config, loadConfig } from '../lib/config/config.ts';
import { withCredentials } from '../lib/config/credentials.ts';
import { runService } from '../lib/http/run-service.ts';
import { checkPublicBind, readyLine } from './stack.ts';
import { linkWanted, startServices, threadsWanted } from './threads.ts';

// `npm start`: the three services in one process, on the embedded defaults (SQLite, local files); with
// TOOLSHIFT_THREADS=2 the gateway and the tool-server run on a second thread (start/threads.ts). The services
// log where they listen at debug only; this prints the one line a user needs, once Ctrl-C would stop them.
let line = '';

/**
 * Where the console is, for the ready line: a one-time login link for the operator (one use, 10 minutes;
 * `toolshift console` prints another), or the console itself where there are no tokens.
 */
async function consoleLink(agentUrl: string, config: Config): Promise<string> {
  const token = config.gateway.adminToken;
  if (!token) return `${agentUrl}/console/`;
  const res = await fetch(`${agentUrl}/console/links`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  if (!res.ok) throw new Error(`the console's login link could not be made: ${await res.text()}`);
  return ((await res.json()) as { url: string }).url;
}

await runService(
  'toolshift',
  async () => {
    const config = withCredentials(loadConfig());
    checkPublicBind(config);
    const { tools, gateway, agent } = await startServices(config, threadsWanted(), linkWanted());
    line = readyLine(
      { agent: agent.url, gateway: gateway.url, console: await consoleLink(agent.url, config) },
      config,
    );
    return [tools, gateway, agent];
  },
  () => process.stderr.write(line),
);
