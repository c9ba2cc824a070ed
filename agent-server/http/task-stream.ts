import type { Context } from 'hono';
import { type SSEStreamingApi, streamSSE } from 'hono/streaming';
import type { ConsoleLogin } from '../../lib/http/security.ts';
import { type ExecuteTaskResponse, isLive, type ModelDeltaEvent, type TaskEvent } from '../contract.ts';
import type { TaskStore } from '../store/store.ts';
import { type Agent, resultOf } from '../tasks/agent.ts';

// A task's events as Server-Sent Events: what is stored (after the client's Last-Event-ID), then what happens
// live while the task runs, then one `result` event. Each event's SSE id is its seq, so a client that lost
// the connection resumes where it left off. Comments keep an idle stream open through proxies. A task not
// running in this process (another agent-server on the same database runs it) is followed in the store.
// The model's text as it streams (`model_delta`) goes out between them with no id: it is not stored, so a
// stream resumed after an id never sends it again, and one followed in the store never has it.

/** What a stream needs. */
export interface TaskStreamDeps {
  agent: Agent;
  store: TaskStore;
  /** How often an idle stream gets a keep-alive comment. */
  heartbeatMs: number;
  /**
   * How often the store is read for a task running in another process (sharing the database), as the
   * backstop of the store's notifications. Default 250 ms, or 2 s on a store that notifies.
   */
  pollMs?: number;
}

const FINISHED = (status: string) => !isLive(status);

/** The seq a client has already seen: `Last-Event-ID` (set by EventSource on reconnect), else `?after=`. */
export function resumeAfter(c: Context, after: number | undefined): number {
  const header = Number(c.req.header('last-event-id'));
  if (Number.isInteger(header) && header > 0) return header;
  return after ?? 0;
}

/** How often a console login's stream asks whether the login still holds. */
const LOGIN_RECHECK_MS = 1000;

/** What one stream has been given and not yet sent: the agent's events, the result, another process's word. */
interface Feed {
  queue: (TaskEvent | ModelDeltaEvent)[];
  result?: ExecuteTaskResponse;
  /** Another process sharing the store said it wrote events of this task (it runs there, or went there). */
  told: boolean;
  /** Wakes the loop waiting for more (set while it waits). */
  wake?: () => void;
}

/** Wakes the stream's loop, if it waits. */
function poke(feed: Feed): void {
  feed.wake?.();
  feed.wake = undefined;
}

/** Streams `taskId`'s events after seq `after`, following the task while it runs; the task must exist. */
export function streamTask(c: Context, deps: TaskStreamDeps, taskId: string, after: number): Response {
  return streamSSE(c, async (stream) => {
    const feed: Feed = { queue: [], told: false };
    // Subscribe before reading what is stored, so nothing falls between the two (duplicates go by seq).
    const unsubscribe = deps.agent.follow(taskId, {
      event: (e) => {
        feed.queue.push(e);
        poke(feed);
      },
      live: (e) => {
        feed.queue.push(e);
        poke(feed);
      },
      end: (r) => {
        feed.result = r;
        poke(feed);
      },
    });
    stream.onAbort(() => poke(feed));
    const stopHearing = deps.store.onTaskEvents(taskId, () => {
      feed.told = true;
      poke(feed);
    });
    const loginHolds = loginCheck(c, stream, feed);
    const heartbeat = setInterval(() => {
      // A write into a stream that closed meanwhile fails; the loop below ends it.
      loginHolds()
        .then((holds) => (holds ? stream.write(': keep-alive\n\n') : undefined))
        .catch(() => {});
    }, deps.heartbeatMs);
    let last = after;
    const send = async (e: TaskEvent | ModelDeltaEvent) => {
      if (!('seq' in e)) {
        if (await loginHolds()) await stream.writeSSE({ event: e.type, data: JSON.stringify(e) });
        return;
      }
      if (e.seq <= last || !(await loginHolds())) return;
      last = e.seq;
      await stream.writeSSE({ event: e.type, id: String(e.seq), data: JSON.stringify(e) });
    };
    /** Sends what the store holds past the last event sent. */
    const sendStored = async () => {
      feed.told = false;
      for (const e of await deps.store.events(taskId, last)) await send(e);
    };
    const following: Following = { stream, feed, deps, taskId, send, sendStored };
    try {
      for (const e of await deps.store.events(taskId, after)) await send(e);
      if (unsubscribe) await followHere(following);
      else if (!(await followStore(following))) return;
      if (stream.aborted) return;
      // Events this process did not see (the task ran in another process sharing the store) come from the store.
      await sendStored();
      const final = feed.result ?? (await storedResult(deps.store, taskId));
      if (final) await stream.writeSSE({ event: 'result', data: JSON.stringify(final) });
    } finally {
      clearInterval(heartbeat);
      unsubscribe?.();
      stopHearing();
    }
  });
}

/**
 * A console login's stream ends with the login (its token rotated, logged out): asked again before an event
 * goes out, at most once a second, and at each heartbeat. Other streams always hold.
 */
function loginCheck(c: Context, stream: SSEStreamingApi, feed: Feed): () => Promise<boolean> {
  const login = c.get('consoleLogin') as ConsoleLogin | undefined;
  let checkedAt = Date.now();
  return async () => {
    if (!login?.holds || Date.now() - checkedAt < LOGIN_RECHECK_MS) return true;
    checkedAt = Date.now();
    const holds = await login.holds().catch(() => false);
    if (!holds) {
      stream.abort();
      poke(feed);
    }
    return holds;
  };
}

/** What the two ways of following a task share. */
interface Following {
  stream: SSEStreamingApi;
  feed: Feed;
  deps: TaskStreamDeps;
  taskId: string;
  send: (e: TaskEvent | ModelDeltaEvent) => Promise<void>;
  sendStored: () => Promise<void>;
}

const pollMsOf = (deps: TaskStreamDeps) => deps.pollMs ?? (deps.store.embedded ? 250 : 2000);

/** Followed here (running, or queued here and perhaps claimed by another process): until its result. */
async function followHere({ stream, feed, deps, send, sendStored }: Following): Promise<void> {
  const pollMs = pollMsOf(deps);
  while (!stream.aborted && feed.result === undefined) {
    if (feed.queue.length === 0 && !feed.told) {
      // On a shared store the task may have gone to another process: its events are read now and
      // then besides the notifications (the backstop).
      let backstop: NodeJS.Timeout | undefined;
      await new Promise<void>((r) => {
        feed.wake = r;
        if (!deps.store.embedded) {
          backstop = setTimeout(() => {
            feed.told = true;
            poke(feed);
          }, pollMs);
        }
      });
      clearTimeout(backstop);
    }
    while (feed.queue.length > 0 && !stream.aborted)
      await send(feed.queue.shift() as TaskEvent | ModelDeltaEvent);
    if (feed.told) await sendStored();
  }
  while (feed.queue.length > 0 && !stream.aborted)
    await send(feed.queue.shift() as TaskEvent | ModelDeltaEvent);
}

/**
 * Not here: read the store whenever another process says it has new events of the task, and now and then
 * besides (the backstop), until the task has ended. False when the task is gone (or the store failed).
 */
async function followStore({ stream, feed, deps, taskId, sendStored }: Following): Promise<boolean> {
  const pollMs = pollMsOf(deps);
  for (;;) {
    feed.told = false;
    // A store that fails (closing with the service) ends the stream; the client reconnects.
    const task = await deps.store.getTask(taskId).catch(() => undefined);
    if (!task) return false;
    if (FINISHED(task.status) || stream.aborted) return true;
    await sendStored();
    if (feed.told) continue;
    await new Promise<void>((r) => {
      const t = setTimeout(r, pollMs);
      feed.wake = () => {
        clearTimeout(t);
        r();
      };
    });
  }
}

async function storedResult(store: TaskStore, taskId: string): Promise<ExecuteTaskResponse | undefined> {
  const task = await store.getTask(taskId);
  return task ? resultOf(task) : undefined;
}
