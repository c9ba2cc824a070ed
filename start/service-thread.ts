import { parentPort, workerData } from 'node:worker_threads';
import type { Config } from '../lib/config/config.ts';
import { keepRunningOnUnhandledRejection } from '../lib/http/run-service.ts';
import type { Listening } from '../lib/http/serve.ts';
import { startGateway } from '../mcp-gateway/server.ts';
import { startToolServer } from '../tool-server/server.ts';

// The tool-server and the gateway of `npm start` in a worker thread of their own (start/threads.ts): started
// with the config the main thread resolved, they say where they listen, and close when told to.

/** What the main thread hands the thread. */
export interface ServiceThreadData {
  config: Config;
  /** Whether the process's stdout is a terminal (a thread's own stdout never is): pretty logs, colour. */
  tty: boolean;
}

interface Where {
  url: string;
  port: number;
}

/** What the thread says: where the two listen, that they failed to start, or that they closed. */
export type ServiceThreadMessage = { tools: Where; gateway: Where } | { error: string } | { closed: true };

const port = parentPort;
if (!port) throw new Error('start/service-thread.ts runs in a worker thread (start/threads.ts starts it)');
const { config, tty } = workerData as ServiceThreadData;
keepRunningOnUnhandledRejection('toolshift');
// Logs go straight to the process's fd 1 (pino), so they look the way the terminal would have them.
Object.defineProperty(process.stdout, 'isTTY', { value: tty, configurable: true });

const running: Listening[] = [];
/** Closes what has started, newest first; a failure to close is logged and the rest still closed. */
async function closeAll() {
  for (const service of running.reverse()) {
    try {
      await service.close();
    } catch (err) {
      process.stderr.write(`toolshift: closing a service failed: ${(err as Error).message}\n`);
    }
  }
  running.length = 0;
}
try {
  // Where each listens is said once, by start/start.ts (its ready line): logged here at debug only.
  const tools = await startToolServer(config, { announce: false });
  running.push(tools);
  const gateway = await startGateway(
    { ...config, tools: { ...config.tools, url: tools.url } },
    // On one thread: the gateway calls the tool-server's calls directly (the agent, on the other, over HTTP).
    { announce: false, toolServer: tools.local },
  );
  running.push(gateway);
  port.postMessage({
    tools: { url: tools.url, port: tools.port },
    gateway: { url: gateway.url, port: gateway.port },
  } satisfies ServiceThreadMessage);
} catch (err) {
  await closeAll();
  port.postMessage({ error: (err as Error).message } satisfies ServiceThreadMessage);
  port.close();
}
port.on('message', async (message: unknown) => {
  if (message !== 'close') return;
  await closeAll();
  port.postMessage({ closed: true } satisfies ServiceThreadMessage);
  port.close();
});
