import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { LeaseLost, type StoreOptions } from './interface.ts';

// The leases one worker holds through a task store (both stores use this): the fence of each task it runs,
// the heartbeat that renews them all in one statement, and who hears when one is lost.

/** How long a lease lasts by default; the heartbeat renews it every third of that. */
export const DEFAULT_LEASE_MS = 30_000;

export type Leases = ReturnType<typeof createLeases>;

/**
 * This worker's leases. `renew` extends the given (task, fence) leases that are still this worker's and
 * unexpired, and returns the ids it extended; any other one is lost.
 */
export function createLeases(
  opts: StoreOptions,
  renew: (held: [taskId: string, fence: number][]) => Promise<string[]>,
) {
  const holder = opts.holder ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const leaseMs = opts.leaseMs ?? DEFAULT_LEASE_MS;
  const now = opts.now ?? Date.now;
  /**
   * The fence of each task this worker holds, or held until it lost the lease (its writes still carry that
   * fence, so the database refuses them, until the worker lets go of the task).
   */
  const held = new Map<string, number>();
  /** Tasks whose lease this worker lost. */
  const lost = new Set<string>();
  const listeners = new Set<(taskId: string) => void>();

  /** The task's lease is gone (when `fence` is given: only if that is still the one held). */
  const lose = (taskId: string, fence?: number) => {
    if (!held.has(taskId) || lost.has(taskId) || (fence !== undefined && held.get(taskId) !== fence)) return;
    lost.add(taskId);
    for (const l of listeners) l(taskId);
  };
  /** The renewal in flight, if any: never two at a time. */
  let beating: Promise<void> | undefined;
  /** Renews every lease held and not lost; leases the database no longer grants are lost. */
  const renewHeld = (): Promise<void> => {
    beating ??= (async () => {
      try {
        const leases = [...held].filter(([taskId]) => !lost.has(taskId));
        if (leases.length === 0) return;
        const renewed = new Set(await renew(leases));
        for (const [taskId, fence] of leases) if (!renewed.has(taskId)) lose(taskId, fence);
      } finally {
        beating = undefined;
      }
    })();
    return beating;
  };
  const heartbeat = setInterval(
    () => {
      // The database unreachable: its writes wait for it, and the first thing done when it is back is this
      // renewal (renewNow), so a lease that lapsed meanwhile is taken back unless another worker took the task.
      if (held.size > 0) renewHeld().catch(() => {});
    },
    Math.max(10, Math.floor(leaseMs / 3)),
  );
  heartbeat.unref();

  return {
    holder,
    leaseMs,
    /** The leases' clock (StoreOptions.now). */
    now,
    /** The fence this worker holds the task under (undefined: none). */
    fence: (taskId: string) => held.get(taskId),
    take: (taskId: string, fence: number) => {
      held.set(taskId, fence);
      lost.delete(taskId);
    },
    /** Lets go of the task (it paused, ended, went back to the queue, or goes on elsewhere). */
    drop: (taskId: string) => {
      held.delete(taskId);
      lost.delete(taskId);
    },
    lose,
    /** Throws LeaseLost (and tells the listeners) when a fenced write of `taskId` changed nothing. */
    check(taskId: string, fence: number | undefined, changed: number) {
      if (changed > 0 || fence === undefined) return;
      lose(taskId, fence);
      throw new LeaseLost(taskId);
    },
    onLost: (listener: (taskId: string) => void) => listeners.add(listener),
    /** Renews the leases now (after an outage, before the writes that waited for it); rejects when it cannot. */
    renewNow: renewHeld,
    stop: () => clearInterval(heartbeat),
  };
}
