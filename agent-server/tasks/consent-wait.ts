import { ServiceError } from '../../lib/http/http-client.ts';
import type { Logger } from '../../lib/telemetry/log.ts';
import type { PendingConsent } from '../contract.ts';
import { type ApprovalDecision, throwIfStopped } from '../loop/tool-step.ts';

// Paused tasks waiting for their owners to connect their own accounts: one loop per worker asks the gateway
// about all of them every few seconds (each owner and toolset once a round, however many tasks wait for it),
// backs off while the gateway cannot be reached, and ends a wait past its deadline. A task's wait ends when
// the owner has connected the account, the deadline passes, or the task is stopped.

/** Whether `owner` has connected their own account for `toolset` (the gateway's connectionFor route). */
export type ConnectedCheck = (toolset: string, owner: string) => Promise<boolean>;

export interface ConsentWatchOptions {
  connected: ConnectedCheck;
  /** How often the waits are asked about (a round), while any task waits. */
  pollMs: number;
  /** The longest pause between rounds while the gateway cannot be reached (the pause doubles up to it). */
  maxBackoffMs?: number;
  log: Logger;
  now?: () => number;
}

interface Wait {
  pending: PendingConsent;
  deadline: number;
  settle(decision: ApprovalDecision): void;
}

export type ConsentWatch = ReturnType<typeof createConsentWatch>;

export function createConsentWatch(opts: ConsentWatchOptions) {
  const now = opts.now ?? Date.now;
  const maxBackoffMs = opts.maxBackoffMs ?? 60_000;
  const waits = new Set<Wait>();
  let looping = false;
  /** Ends the pause between rounds at once (a wait added or gone). */
  let wake: (() => void) | undefined;

  /** Rounds while any task waits; the pause between them doubles while the gateway cannot be reached. */
  async function loop(): Promise<void> {
    let pauseMs = opts.pollMs;
    while (waits.size > 0) {
      pauseMs = (await round(waits, opts, now)) ? opts.pollMs : Math.min(pauseMs * 2, maxBackoffMs);
      if (waits.size === 0) break;
      const nearest = Math.min(...[...waits].map((w) => w.deadline));
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(10, Math.min(pauseMs, nearest - now())));
        function done() {
          clearTimeout(timer);
          wake = undefined;
          resolve();
        }
        wake = done;
      });
    }
  }

  function start(): void {
    if (looping) return;
    looping = true;
    loop()
      .catch((err: unknown) => opts.log.error({ err }, 'the wait for consents stopped'))
      .finally(() => {
        looping = false;
        // A wait added as the last round ended is not left without one.
        if (waits.size > 0) start();
      });
  }

  return {
    /** How many tasks wait here. */
    size: () => waits.size,
    /**
     * Waits until the owner has connected the account (approved), the wait's deadline passed (`fail` says
     * so), or `signal` stops the task (throws its reason).
     */
    wait(pending: PendingConsent, signal: AbortSignal): Promise<ApprovalDecision> {
      throwIfStopped(signal);
      return new Promise<ApprovalDecision>((resolve, reject) => {
        const w: Wait = {
          pending,
          deadline: Date.parse(pending.expires_at),
          settle: (decision) => {
            end();
            resolve(decision);
          },
        };
        const stopped = () => {
          end();
          try {
            throwIfStopped(signal);
          } catch (err) {
            reject(err);
          }
        };
        const end = () => {
          waits.delete(w);
          signal.removeEventListener('abort', stopped);
          // The last wait gone: the loop ends now rather than after its pause.
          if (waits.size === 0) wake?.();
        };
        waits.add(w);
        signal.addEventListener('abort', stopped, { once: true });
        // A new wait is asked about now, not at the end of the pause under way.
        if (looping) wake?.();
        else start();
      });
    },
  };
}

/** One round: waits past their deadline end; every owner and toolset waited for is asked about once. */
async function round(
  waits: ReadonlySet<Wait>,
  opts: ConsentWatchOptions,
  now: () => number,
): Promise<boolean> {
  const byAccount = new Map<string, Wait[]>();
  for (const w of waits) {
    if (now() >= w.deadline) {
      w.settle({ approved: false, fail: notInTime(w.pending) });
      continue;
    }
    const key = `${w.pending.owner}\n${w.pending.toolset}`;
    byAccount.set(key, [...(byAccount.get(key) ?? []), w]);
  }
  for (const group of byAccount.values()) {
    const { owner, toolset } = group[0].pending;
    try {
      if (await opts.connected(toolset, owner)) for (const w of group) w.settle({ approved: true });
    } catch (err) {
      // The toolset or the person is gone: nobody can connect it any more.
      if (err instanceof ServiceError && err.status === 404) {
        for (const w of group) w.settle({ approved: false, fail: `Task failed: ${err.message}` });
        continue;
      }
      opts.log.warn({ err, toolset }, 'cannot ask the gateway whether a person connected their account');
      return false;
    }
  }
  return true;
}

const notInTime = (p: PendingConsent) =>
  `Task failed: the person (${p.owner}) did not connect their own account for toolset ${p.toolset} before ${p.expires_at} (CONSENT_TIMEOUT_S)${p.connect_url ? `; they connect it at ${p.connect_url}, then run the task again` : ''}`;
