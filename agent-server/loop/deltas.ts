import type { EventData } from '../contract.ts';

// The model's text as it streams, on its way to the task's followers: gathered and sent every DELTA_EVERY_MS
// rather than a `model_delta` per token (a token is a few characters; an event each is a write each to every
// follower). Never stored: the finished reply is, in its `model_call` event.

/** How often a streaming reply's text goes out. */
export const DELTA_EVERY_MS = 50;

/** Tells the task's followers something not stored (tasks/run.ts); the model's streamed text. */
export type LiveEmit = (type: 'model_delta', data: EventData['model_delta']) => void;

/** One step's streamed text, gathered and sent on a timer; `retried` drops what the failed attempt said. */
export function deltaSender(live: LiveEmit, step: number) {
  let attempt = 1;
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  /** Sends what has gathered (before the reply's `model_call`, so the text comes first). */
  const flush = () => {
    stop();
    if (pending === '') return;
    const text = pending;
    pending = '';
    live('model_delta', { step, attempt, text });
  };
  return {
    onDelta(text: string) {
      pending += text;
      timer ??= setTimeout(flush, DELTA_EVERY_MS);
    },
    /** The attempt failed and is tried again: its text is not sent, the next attempt's carries its number. */
    retried() {
      stop();
      pending = '';
      attempt++;
    },
    flush,
    /** The call ended (answered or not): nothing more goes out. */
    close() {
      stop();
      pending = '';
    },
  };
}
