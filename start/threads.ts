import { Worker } from 'node:worker_threads';
import { startAgentServer } from '../agent-server/server.ts';
import type { Config } from '../lib/config/config.ts';
import { siblingModule } from '../lib/config/installation.ts';
import type { Listening } from '../lib/http/serve.ts';
import type { ServiceThreadData, ServiceThreadMessage } from './service-thread.ts';
import { startStack } from './stack.ts';

// `npm start` with TOOLSHIFT_THREADS=2: the agent-server on the main thread, the gateway and the tool-server on
// a worker thread (start/service-thread.ts), so the daemon uses two cores instead of one event loop — under a
// thousand concurrent tasks one loop is the ceiling, and the agent's share of a step is about the other two's
// together. Still one process: the agent reaches the gateway over loopback HTTP (a thread's objects are not
// shared), the gateway calls the tool-server on its thread directly. Not the default: the second
// thread holds its own copy of the modules and the tokenizer (about 140 MiB, BENCHMARKS.md figure 11), and one
// loop already keeps up with a couple of hundred concurrent tasks. A thread that fails takes the process down
// with it rather than leaving a half-running daemon.

type Started = { tools: Listening; gateway: Listening };

/** Starts the tool-server and the gateway on a worker thread; resolves once both listen. */
export function startServiceThread(config: Config): Promise<Started> {
  const data: ServiceThreadData = { config, tty: process.stdout.isTTY === true };
  const worker = new Worker(siblingModule(import.meta.url, './service-thread.ts'), {
    workerData: data,
    name: 'gateway and tool-server',
  });
  let exited = false;
  worker.once('exit', () => {
    exited = true;
  });
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= exited
      ? Promise.resolve()
      : new Promise<void>((done) => {
          worker.once('exit', () => done());
          // The thread ends by itself once its services have closed (its logs written out); a thread that
          // does not is stopped.
          worker.once('message', () => setTimeout(() => void worker.terminate(), 5000).unref());
          worker.postMessage('close');
        });
    return closing;
  };
  /** The thread died under a running daemon: stop the rest the way SIGTERM does (committing what is queued), exit 1. */
  let dying = false;
  const died = (why: string) => {
    if (closing || dying) return;
    dying = true;
    process.stderr.write(`toolshift: the gateway's thread ${why}; stopping\n`);
    process.exitCode = 1;
    process.kill(process.pid, 'SIGTERM');
  };
  return new Promise((resolve, reject) => {
    const early = (err: Error) => reject(err);
    const gone = (code: number) =>
      reject(new Error(`the services' thread stopped while starting (exit code ${code})`));
    worker.once('error', early);
    worker.once('exit', gone);
    worker.once('message', (m: ServiceThreadMessage) => {
      worker.off('error', early);
      worker.off('exit', gone);
      if ('error' in m) {
        worker
          .terminate()
          .catch((err: Error) =>
            process.stderr.write(`toolshift: the thread did not stop: ${err.message}\n`),
          );
        return reject(new Error(m.error));
      }
      if (!('tools' in m)) return reject(new Error(`the services' thread answered ${JSON.stringify(m)}`));
      // From here on the thread lives as long as the process.
      worker.on('error', (err) => died(`failed: ${err.stack ?? err.message}`));
      worker.on('exit', (code) => died(`stopped unexpectedly (exit code ${code})`));
      // Closing either closes both (the gateway first): they share the thread.
      resolve({
        tools: { ...m.tools, close },
        gateway: { ...m.gateway, close },
      });
    });
  });
}

/** How many threads `npm start` uses: TOOLSHIFT_THREADS, 1 (the default) or 2. */
export function threadsWanted(env: NodeJS.ProcessEnv = process.env): 1 | 2 {
  const set = env.TOOLSHIFT_THREADS?.trim();
  if (!set || set === '1') return 1;
  if (set === '2') return 2;
  throw new Error(`TOOLSHIFT_THREADS must be 1 or 2 (got "${set}")`);
}

/** How `npm start`'s services call each other: TOOLSHIFT_LINK, `in-process` (the default) or `http`. */
export function linkWanted(env: NodeJS.ProcessEnv = process.env): 'in-process' | 'http' {
  const set = env.TOOLSHIFT_LINK?.trim();
  if (!set || set === 'in-process') return 'in-process';
  if (set === 'http') return 'http';
  throw new Error(`TOOLSHIFT_LINK must be in-process or http (got "${set}")`);
}

/** The three services: all on this thread (threads = 1), or the gateway and tool-server on a second one. */
export async function startServices(
  config: Config,
  threads: 1 | 2,
  link: 'in-process' | 'http' = 'in-process',
): Promise<{ tools: Listening; gateway: Listening; agent: Listening }> {
  if (threads === 1) return startStack(config, { link });
  if (link === 'http')
    throw new Error(
      'TOOLSHIFT_LINK=http is for one thread: with TOOLSHIFT_THREADS=2 the agent reaches the gateway over HTTP ' +
        'already, and the gateway its tool-server on its own thread in-process; unset one of the two',
    );
  const c = structuredClone(config);
  // A thread's stdout is never a terminal: the format the main thread would choose is decided here.
  if (c.logFormat === 'auto') c.logFormat = process.stdout.isTTY ? 'pretty' : 'json';
  const { tools, gateway } = await startServiceThread(c);
  c.tools.url = tools.url;
  c.gateway.url = gateway.url;
  try {
    return { tools, gateway, agent: await startAgentServer(c, { announce: false }) };
  } catch (err) {
    await gateway.close();
    throw err;
  }
}
