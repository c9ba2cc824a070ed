import type { Listening } from './serve.ts';

/**
 * A promise rejected with nothing to handle it is logged (one JSON line on stderr, with its stack) and the
 * process goes on: Node's default ends it, and with it every task and request in flight, for what is at worst
 * one lost answer (a database blip once stopped every agent process so). Such a rejection is a bug to fix;
 * the lint rule noFloatingPromises keeps them out of the code.
 */
export function keepRunningOnUnhandledRejection(name: string): void {
  process.on('unhandledRejection', (reason) => {
    const err = reason instanceof Error ? reason : new Error(String(reason));
    process.stderr.write(
      `${JSON.stringify({
        level: 50,
        time: Date.now(),
        name,
        err: { type: err.name, message: err.message, stack: err.stack },
        msg: 'a promise was rejected and nothing handled it; the process goes on',
      })}\n`,
    );
  });
}

/**
 * Starts services for a main script: a start failure prints one line and exits 1; SIGINT/SIGTERM close cleanly.
 * `ready` runs once they may be stopped that way (what it prints is what a user acts on, Ctrl-C included).
 */
export async function runService(
  name: string,
  start: () => Promise<Listening | Listening[]>,
  ready?: () => void,
): Promise<void> {
  keepRunningOnUnhandledRejection(name);
  let running: Listening[];
  try {
    const started = await start();
    running = Array.isArray(started) ? started : [started];
  } catch (err) {
    process.stderr.write(`${name} failed to start: ${(err as Error).message}\n`);
    process.exit(1);
  }
  // Exit 0, unless something set process.exitCode before asking to stop (a service thread that died).
  const stop = async () => {
    for (const service of [...running].reverse()) await service.close();
    process.exit();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  ready?.();
}
