import { parseQueueChange } from './claims.ts';
import { type DialectHooks, END_CHANNEL, EVENTS_CHANNEL, type Kdb, QUEUE_CHANNEL } from './dialect.ts';
import type { QueueChange, TaskStore } from './interface.ts';

// What other processes sharing the database tell this one (PostgreSQL's LISTEN/NOTIFY): tasks with new events,
// tasks ended, and changes to the queue. One listening connection, opened once something wants to hear; an
// embedded store (SQLite) has no other process and hears nothing.

type NotificationMethods = Pick<TaskStore, 'onQueueChange' | 'onTaskEvents' | 'onTaskEnd' | 'wake'>;

export function notifications(db: Kdb, hooks: DialectHooks, holder: string) {
  const queueListeners = new Set<(change: QueueChange) => void>();
  /** Listeners of each task's events (and ends), by task: a notification names its tasks, each found at once. */
  const eventListeners = new Map<string, Set<() => void>>();
  const endListeners = new Map<string, Set<() => void>>();
  let unlisten: (() => Promise<void>) | undefined;
  const onNotify = (channel: string, payload: string) => {
    if (channel === QUEUE_CHANNEL) {
      const change = parseQueueChange(payload, holder);
      if (change) for (const l of [...queueListeners]) l(change);
      return;
    }
    const listeners = channel === END_CHANNEL ? endListeners : eventListeners;
    const ids = payload === '*' ? [...listeners.keys()] : payload.split(',');
    for (const id of ids) for (const l of [...(listeners.get(id) ?? [])]) l();
  };
  /** Starts listening once something wants to hear. */
  const hear = () => {
    unlisten ??= hooks.listen?.([EVENTS_CHANNEL, QUEUE_CHANNEL, END_CHANNEL], onNotify);
  };
  const listenTo = (listeners: Map<string, Set<() => void>>, taskId: string, listener: () => void) => {
    if (hooks.embedded) return () => {};
    hear();
    const set = listeners.get(taskId) ?? new Set<() => void>();
    listeners.set(taskId, set);
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && listeners.get(taskId) === set) listeners.delete(taskId);
    };
  };
  /** Tells the other processes the queue changed (`payload`: what, claims.ts; empty: anything). */
  const notifyQueue = (payload = '') => hooks.notify(db, QUEUE_CHANNEL, payload);
  const methods: NotificationMethods = {
    onQueueChange(listener) {
      if (hooks.embedded) return () => {};
      hear();
      queueListeners.add(listener);
      return () => queueListeners.delete(listener);
    },
    onTaskEvents: (taskId, listener) => listenTo(eventListeners, taskId, listener),
    onTaskEnd: (taskId, listener) => listenTo(endListeners, taskId, listener),
    wake: () => notifyQueue(),
  };
  return { methods, notifyQueue, stop: async () => unlisten?.() };
}
