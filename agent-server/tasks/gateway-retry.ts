import { ServiceError } from '../../lib/http/http-client.ts';
import type { GatewayClient } from '../clients/gateway.ts';

// A running task's view of the gateway while the gateway's database (PostgreSQL) is unreachable, or the
// gateway itself is away (restarting, a replica gone behind a balancer): what the gateway refuses for its
// database (503, code `store_unavailable`) is asked again until it answers, and so are reads and toolset
// changes that could not reach it at all, so a blip costs the task time, not its run. A tool call too: the gateway reads what it checks (the session's toolsets,
// the operator's switches and limits) before it runs the tool, and after it only writes its audit row behind
// (a failure there is logged, never the call's), so a call refused so never ran.

/** How long a task waits for a gateway it cannot reach at all (a restart takes seconds). */
export const GATEWAY_AWAY_MS = 30_000;

/** The longest wait between two tries (the gateway says 5 s in Retry-After). */
const MAX_WAIT_MS = 5000;

/** Whether the gateway refused because its database is unreachable (nothing was done). */
export function storeUnavailable(err: unknown): boolean {
  return (
    err instanceof ServiceError &&
    err.status === 503 &&
    (err.body as { code?: unknown } | undefined)?.code === 'store_unavailable'
  );
}

/**
 * Whether the gateway itself could not be reached — refused, reset, or a balancer's answer for a replica that
 * is not there (502–504 without the gateway's service header): a restart or a replica going away. Asked again
 * for what changes nothing twice (reads, and toolset changes, which set a state); never for a tool call, whose
 * lost answer is its own matter (loop/lost-answer.ts).
 */
export function gatewayAway(err: unknown): boolean {
  if (!(err instanceof ServiceError) || err.service !== undefined) return false;
  const cause = (err.cause as { code?: unknown } | undefined)?.code;
  if (cause === 'ECONNREFUSED' || cause === 'ECONNRESET' || cause === 'UND_ERR_SOCKET') return true;
  return err.status === 502 || err.status === 503 || err.status === 504;
}

/** Runs `call` until the gateway answers it with anything `waitFor` does not wait out, or `signal` stops the task. */
async function untilAnswered<T>(
  call: () => Promise<T>,
  signal: AbortSignal,
  onWait: (err: unknown) => void,
  waitFor: (err: unknown) => boolean,
) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!waitFor(err) || signal.aborted) throw err;
      if (attempt === 0) onWait(err);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(MAX_WAIT_MS, 250 * 2 ** attempt));
        function done() {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          resolve();
        }
        signal.addEventListener('abort', done, { once: true });
      });
      if (signal.aborted) throw signal.reason;
    }
  }
}

/** `gateway` for one task stopped by `signal`, its reads and toolset changes asked again through an outage. */
export function ridingOutages(
  gateway: GatewayClient,
  signal: AbortSignal,
  onWait: (err: unknown) => void,
  awayMs = GATEWAY_AWAY_MS,
): GatewayClient {
  // The database is waited out for the task's whole time; a gateway that cannot be reached for `awayMs` is
  // not restarting but gone (a wrong GATEWAY_URL): the task then fails saying so.
  const again = <T>(call: () => Promise<T>) => {
    let awaySince: number | undefined;
    return untilAnswered(call, signal, onWait, (err) => {
      if (storeUnavailable(err)) return true;
      if (!gatewayAway(err)) return false;
      awaySince ??= Date.now();
      return Date.now() - awaySince < awayMs;
    });
  };
  return {
    ...gateway,
    // Every argument passed on as given (a call's idempotency key and fence above all).
    listToolsets: (...a) => again(() => gateway.listToolsets(...a)),
    manageToolsets: (...a) => again(() => gateway.manageToolsets(...a)),
    tools: (...a) => again(() => gateway.tools(...a)),
    callTool: (...a) => untilAnswered(() => gateway.callTool(...a), signal, onWait, storeUnavailable),
    getApproval: (...a) => again(() => gateway.getApproval(...a)),
    renderPrompt: (...a) => again(() => gateway.renderPrompt(...a)),
    forTask: (taskId, owner) => ridingOutages(gateway.forTask(taskId, owner), signal, onWait, awayMs),
    // The same client marked otherwise rides out the same outages (a script's calls, goal priming).
    scripted: () => ridingOutages(gateway.scripted(), signal, onWait, awayMs),
    priming: () => ridingOutages(gateway.priming(), signal, onWait, awayMs),
  };
}
