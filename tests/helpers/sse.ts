import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** An SSE response read incrementally: the next message, comments seen so far, and a way to hang up. */
export interface SseReader {
  /** The next message, or undefined once the stream has ended. */
  next(): Promise<EventSourceMessage | undefined>;
  /** Reads until a message named `event` (returned) or the end (undefined); everything read is kept in `seen`. */
  until(event: string): Promise<EventSourceMessage | undefined>;
  /** Every message read so far. */
  seen: EventSourceMessage[];
  /** Comment lines (`: keep-alive`) read so far. */
  comments: string[];
  /** Reads until a comment line arrives (or the stream ends); messages read meanwhile wait for next(). */
  untilComment(): Promise<string | undefined>;
  /** Hangs up, as a client that goes away. */
  cancel(): Promise<void>;
}

/** Wraps a text/event-stream response. */
export function readSse(res: Response): SseReader {
  if (!res.body) throw new Error(`no body (status ${res.status})`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const pending: EventSourceMessage[] = [];
  const seen: EventSourceMessage[] = [];
  const comments: string[] = [];
  const parser = createParser({
    onEvent: (m) => pending.push(m),
    onComment: (c) => comments.push(c),
  });
  let ended = false;
  const readChunk = async () => {
    const { done, value } = await reader.read();
    if (done) ended = true;
    else parser.feed(decoder.decode(value, { stream: true }));
  };
  const next = async (): Promise<EventSourceMessage | undefined> => {
    while (pending.length === 0 && !ended) await readChunk();
    const m = pending.shift();
    if (m) seen.push(m);
    return m;
  };
  return {
    next,
    async until(event) {
      for (;;) {
        const m = await next();
        if (!m || m.event === event) return m;
      }
    },
    seen,
    comments,
    async untilComment() {
      const before = comments.length;
      while (comments.length === before && !ended) await readChunk();
      return comments[before];
    },
    cancel: () => reader.cancel(),
  };
}

/** Reads a whole SSE response into its messages. */
export async function allSse(res: Response): Promise<EventSourceMessage[]> {
  const r = readSse(res);
  while (await r.next());
  return r.seen;
}
