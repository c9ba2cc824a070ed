import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { ConsoleLogin } from '../../lib/http/security.ts';
import type { ExecuteTaskResponse, TaskEvent } from '../contract.ts';
import type { TaskStore } from '../store/store.ts';
import { type Agent, resultOf } from '../tasks/agent.ts';

// A task's events as Server-Sent Events: what is stored (after the client's Last-Event-ID), then what happens
// live while the task runs, then one `result` event. Each event's SSE id is its seq, so a client that lost
// the connection resumes where it left off. Comments keep an idle stream open through proxies. A task not
// running in this process (another agent-server on the same database runs it) is followed in the store.

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

const FINISHED = (status: string) => !['queued', 'running', 'awaiting_approval'].includes(status);

/** The seq a client has already seen: `Last-Event-ID` (set by EventSource on reconnect), else `?after=`. */
export function resumeAfter(c: Context, after: number | undefined): number {
  const header = Number(c.req.header('last-event-id'));
  if (Number.isInteger(header) && header > 0) return header;
  return after ?? 0;
}

/** Streams `taskId`'s events after seq `after`, following the task while it runs; the task must exist. */
/** How often a console login's stream asks whether the login still holds. */
const LOGIN_RECHECK_MS = 1000;

export function streamTask(c: Context, deps: TaskStreamDeps, taskId: string, after: number): Response {
  return streamSSE(c, async (stream) => {
    const queue: TaskEvent[] = [];
    let result: ExecuteTaskResponse | undefined;
    let wake: (() => void) | undefined;
    const poke = () => {
      wake?.();
      wake = undefined;
    };
    // Subscribe before reading what is stored, so nothing falls between the two (duplicates go by seq).
    const unsubscribe = deps.agent.follow(taskId, {
      event: (e) => {
        queue.push(e);
        poke();
      },
      end: (r) => {
        result = r;
        poke();
      },
    });
    stream.onAbort(poke);
    // Another process sharing the store says it wrote events of this task (it runs there, or went there).
    let told = false;
    const stopHearing = deps.store.onTaskEvents(taskId, () => {
      told = true;
      poke();
    });
    // A console login's stream ends with the login (its token rotated, logged out): asked again before an
    // event goes out, at most once a second, and at each heartbeat.
    const login = c.get('consoleLogin') as ConsoleLogin | undefined;
    let checkedAt = Date.now();
    const loginHolds = async (): Promise<boolean> => {
      if (!login?.holds || Date.now() - checkedAt < LOGIN_RECHECK_MS) return true;
      checkedAt = Date.now();
      const holds = await login.holds().catch(() => false);
      if (!holds) {
        stream.abort();
        poke();
      }
      return holds;
    };
    const heartbeat = setInterval(() => {
      // A write into a stream that closed meanwhile fails; the loop below ends it.
      loginHolds()
        .then((holds) => (holds ? stream.write(': keep-alive\n\n') : undefined))
        .catch(() => {});
    }, deps.heartbeatMs);
    let last = after;
    const send = async (e: TaskEvent) => {
      if (e.seq <= last || !(await loginHolds())) return;
      last = e.seq;
      await stream.writeSSE({ event: e.type, id: String(e.seq), data: JSON.stringify(e) });
    };
    const pollMs = deps.pollMs ?? (deps.store.embedded ? 250 : 2000);
    /** Sends what the store holds past the last event sent. */
    const sendStored = async () => {
      told = false;
      for (const e of await deps.store.events(taskId, last)) await send(e);
    };
    try {
      for (const e of await deps.store.events(taskId, after)) await send(e);
      if (unsubscribe) {
        // Followed here (running, or queued here and perhaps claimed by another process).
        while (!stream.aborted && result === undefined) {
          if (queue.length === 0 && !told) {
            // On a shared store the task may have gone to another process: its events are read now and
            // then besides the notifications (the backstop).
            let backstop: NodeJS.Timeout | undefined;
            await new Promise<void>((r) => {
              wake = r;
              if (!deps.store.embedded) {
                backstop = setTimeout(() => {
                  told = true;
                  poke();
                }, pollMs);
              }
            });
            clearTimeout(backstop);
          }
          while (queue.length > 0 && !stream.aborted) await send(queue.shift() as TaskEvent);
          if (told) await sendStored();
        }
        while (queue.length > 0 && !stream.aborted) await send(queue.shift() as TaskEvent);
      } else {
        // Not here: read the store whenever another process says it has new events of the task, and now and
        // then besides (the backstop), until the task has ended.
        for (;;) {
          told = false;
          // A store that fails (closing with the service) ends the stream; the client reconnects.
          const task = await deps.store.getTask(taskId).catch(() => undefined);
          if (!task || FINISHED(task.status) || stream.aborted) {
            if (!task) return;
            break;
          }
          await sendStored();
          if (told) continue;
          await new Promise<void>((r) => {
            const t = setTimeout(r, pollMs);
            wake = () => {
              clearTimeout(t);
              r();
            };
          });
        }
      }
      if (stream.aborted) return;
      // Events this process did not see (the task ran in another process sharing the store) come from the store.
      await sendStored();
      const final = result ?? (await storedResult(deps.store, taskId));
      if (final) await stream.writeSSE({ event: 'result', data: JSON.stringify(final) });
    } finally {
      clearInterval(heartbeat);
      unsubscribe?.();
      stopHearing();
    }
  });
}

async function storedResult(store: TaskStore, taskId: string): Promise<ExecuteTaskResponse | undefined> {
  const task = await store.getTask(taskId);
  return task ? resultOf(task) : undefined;
}
