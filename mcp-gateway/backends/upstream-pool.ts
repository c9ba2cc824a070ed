import type { Logger } from '../../lib/telemetry/log.ts';

// The stdio upstream servers one gateway runs, as a bounded pool. Each server is one process per gateway
// replica (a server that keeps state, such as the memory server's graph, must not be split between two
// processes that would each hold half of it); the pool bounds how many run at once (UPSTREAM_MAX_PROCESSES:
// starting one more stops the least recently used one with no call in flight) and stops a server unused for
// UPSTREAM_IDLE_S (it starts again on its next use). HTTP upstreams run elsewhere and are not counted.

/** What the pool needs of a running server (McpConnection). */
export interface PooledServer {
  readonly label: string;
  /** When it was last used (ms). */
  readonly lastUsed: number;
  /** Calls in flight now. */
  readonly inFlight: number;
  /** Stops the process if no call is in flight (it starts again on next use); whether it stopped. */
  stopUnused(reason: string): Promise<boolean>;
}

export interface PoolOptions {
  /** The most stdio servers running at once in this gateway. */
  maxProcesses: number;
  /** A server unused this long is stopped; 0: never. */
  idleMs: number;
  log: Logger;
  now?: () => number;
}

/** Thrown when every running server is busy and the cap is reached. */
export class PoolFullError extends Error {}

export class UpstreamPool {
  private readonly running = new Set<PooledServer>();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly opts: PoolOptions;
  private readonly now: () => number;

  constructor(opts: PoolOptions) {
    this.opts = opts;
    this.now = opts.now ?? Date.now;
    if (opts.idleMs > 0) {
      this.timer = setInterval(() => void this.sweep(), Math.max(1000, Math.min(opts.idleMs / 2, 30_000)));
      this.timer.unref();
    }
  }

  /** Servers running now. */
  get size(): number {
    return this.running.size;
  }

  /**
   * Makes room for `server` to start: under the cap at once, else by stopping the least recently used
   * server with no call in flight; refuses when every running one is busy.
   */
  async admit(server: PooledServer): Promise<void> {
    if (this.running.has(server)) return;
    // Each running server is asked once: one that would not stop (a call or a connect just began) is passed over.
    const asked = new Set<PooledServer>();
    while (this.running.size >= this.opts.maxProcesses) {
      const idle = [...this.running]
        .filter((s) => s.inFlight === 0 && !asked.has(s))
        .sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (!idle) {
        throw new PoolFullError(
          `${this.running.size} upstream servers are running and every one is in use ` +
            `(UPSTREAM_MAX_PROCESSES=${this.opts.maxProcesses}); try again when one finishes`,
        );
      }
      asked.add(idle);
      this.running.delete(idle);
      const stopped = await idle.stopUnused(
        `stopped to make room for ${server.label} (UPSTREAM_MAX_PROCESSES=${this.opts.maxProcesses}); it starts again on its next use`,
      );
      if (stopped)
        this.opts.log.info({ upstream: idle.label, for: server.label }, 'upstream server stopped for room');
      else this.running.add(idle);
    }
    this.running.add(server);
  }

  /** A server's process ended (stopped, crashed, closed): it no longer counts. */
  left(server: PooledServer): void {
    this.running.delete(server);
  }

  /** Stops the servers unused for the idle lifetime. */
  async sweep(): Promise<void> {
    const cutoff = this.now() - this.opts.idleMs;
    for (const server of [...this.running]) {
      if (server.lastUsed > cutoff || server.inFlight > 0) continue;
      const minutes = Math.round(this.opts.idleMs / 60_000);
      const idle = minutes >= 1 ? `${minutes} min` : `${Math.round(this.opts.idleMs / 1000)} s`;
      if (
        await server.stopUnused(
          `stopped after ${idle} unused (UPSTREAM_IDLE_S); it starts again on its next use`,
        )
      ) {
        this.running.delete(server);
        this.opts.log.info({ upstream: server.label }, 'idle upstream server stopped');
      }
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.running.clear();
  }
}
