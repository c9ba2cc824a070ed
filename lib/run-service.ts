import type { Listening } from './serve.ts';

/**
 * Starts services for a main script: a start failure prints one line and exits 1; SIGINT/SIGTERM close cleanly.
 * `ready` runs once they may be stopped that way (what it prints is what a user acts on, Ctrl-C included).
 */
export async function runService(
  name: string,
  start: () => Promise<Listening | Listening[]>,
  ready?: () => void,
): Promise<void> {
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
