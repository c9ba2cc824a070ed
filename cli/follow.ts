import { createParser } from 'eventsource-parser';
import type { ExecuteTaskResponse, ModelDeltaEvent, TaskEvent } from '../agent-server/contract.ts';
import { errorOf, type ServiceEndpoint } from '../lib/http/http-client.ts';

// Following a task's event stream (GET /agent/tasks/:id/events) to its `result`, resuming with Last-Event-ID
// when the connection drops, so a restart of a proxy or a flaky link costs no events.

/** How a follow is steered: events go to `onEvent`; aborting `signal` detaches (the task runs on). */
export interface FollowOptions {
  onEvent: (event: TaskEvent) => void;
  /** The model's text as it streams (not stored: never replayed after a reconnect). */
  onDelta?: (event: ModelDeltaEvent) => void;
  signal?: AbortSignal;
  /** Reconnections allowed in a row without a new event before giving up. */
  retries?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
  /** How long to keep trying while the agent-server cannot be reached (it restarts); 60 s by default. */
  reconnectForMs?: number;
  /** The agent-server went away (`lost`, with why and for how long it is tried) or came back. */
  onConnection?: (state: { lost: true; reason: string; tryingForMs: number } | { lost: false }) => void;
}

/** How long `run` waits for a daemon that went away mid-task to come back. */
export const RECONNECT_FOR_MS = 60_000;

/** Follows `taskId` until its result; throws when the stream cannot be (re)opened. */
export async function followTask(
  agent: ServiceEndpoint,
  taskId: string,
  opts: FollowOptions,
): Promise<ExecuteTaskResponse> {
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const url = `${agent.baseUrl.replace(/\/$/, '')}/agent/tasks/${encodeURIComponent(taskId)}/events`;
  const connect = connector(agent, url, opts, sleep);
  const seen: Seen = { last: 0, failures: 0 };
  for (;;) {
    const res = await connect(seen.last);
    if (!res) continue;
    if (!res.ok || !res.body) throw await errorOf(res);
    const result = await readEvents(res.body, seen, opts);
    if (result) return result;
    if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('detached');
    // The stream ended without a result: reconnect after the last event seen.
    if (++seen.failures > (opts.retries ?? 5)) {
      throw new Error(
        `the event stream of ${taskId} kept closing before the task ended; see toolshift tasks show ${taskId}`,
      );
    }
    await sleep(Math.min(250 * 2 ** seen.failures, 4000));
  }
}

/** The last event seen, and the streams in a row that closed without a new one. */
interface Seen {
  last: number;
  failures: number;
}

/**
 * Opens the event stream after event `last`. An agent-server reached before may be restarting: while the
 * reconnect window lasts, a failed attempt waits and gives undefined (try again); never reached, or past the
 * window, it throws.
 */
function connector(
  agent: ServiceEndpoint,
  url: string,
  opts: FollowOptions,
  sleep: (ms: number) => Promise<void>,
): (last: number) => Promise<Response | undefined> {
  const doFetch = agent.fetch ?? fetch;
  const now = opts.now ?? Date.now;
  const window = opts.reconnectForMs ?? RECONNECT_FOR_MS;
  let connected = false;
  let attempts = 0;
  /** When the agent-server stopped answering (undefined while it answers). */
  let lostAt: number | undefined;
  return async (last) => {
    let res: Response;
    try {
      res = await doFetch(url, {
        headers: {
          accept: 'text/event-stream',
          ...agent.headers,
          ...(last > 0 ? { 'last-event-id': String(last) } : {}),
        },
        signal: opts.signal,
      });
    } catch (err) {
      // Never reached, or detached: nothing to wait for. Reached before: it may be restarting.
      if (!connected || opts.signal?.aborted) throw err;
      if (lostAt === undefined) {
        lostAt = now();
        opts.onConnection?.({ lost: true, reason: (err as Error).message, tryingForMs: window });
      } else if (now() - lostAt >= window) {
        throw err;
      }
      await sleep(Math.min(250 * 2 ** attempts++, 2000));
      return undefined;
    }
    connected = true;
    if (lostAt !== undefined) {
      lostAt = undefined;
      attempts = 0;
      opts.onConnection?.({ lost: false });
    }
    return res;
  };
}

/** Reads one connection's events, new ones to `onEvent`; the result, or undefined when the stream ended first. */
async function readEvents(
  body: ReadableStream<Uint8Array>,
  seen: Seen,
  opts: FollowOptions,
): Promise<ExecuteTaskResponse | undefined> {
  let result: ExecuteTaskResponse | undefined;
  const parser = createParser({
    onEvent: (m) => {
      if (m.event === 'result') {
        result = JSON.parse(m.data);
        return;
      }
      if (m.event === 'model_delta') {
        opts.onDelta?.(JSON.parse(m.data));
        return;
      }
      const event = JSON.parse(m.data) as TaskEvent;
      if (event.seq <= seen.last) return;
      seen.last = event.seq;
      seen.failures = 0;
      opts.onEvent(event);
    },
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  // Detaching ends the read even where the body is not tied to the request's signal.
  const hangUp = () => {
    reader.cancel().catch(() => undefined);
  };
  opts.signal?.addEventListener('abort', hangUp, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      if (result) return result;
    }
  } catch (err) {
    if (opts.signal?.aborted) throw err;
  } finally {
    opts.signal?.removeEventListener('abort', hangUp);
    reader.releaseLock();
  }
  return result;
}
