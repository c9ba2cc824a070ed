// Every byte an upstream MCP server sends is counted against a cap per message (UPSTREAM_MAX_MESSAGE_BYTES):
// a stdio line, an HTTP JSON body, one SSE event. Without it one huge message (a 3.9 MB entity read back
// three times, a 10 MB schema) grew the gateway until the SDK threw from a stream callback and the daemon
// died. Past the cap the message is dropped whole and the upstream is stopped; the call fails saying so.

/** A message from an upstream over the cap; its text names the cap and the setting. */
export class MessageTooLargeError extends Error {
  constructor(what: string, limit: number) {
    super(
      `the server sent ${what} over UPSTREAM_MAX_MESSAGE_BYTES (${mib(limit)}); it was dropped and the ` +
        'server stopped (restarted on next use)',
    );
    this.name = new.target.name;
  }
}

function mib(bytes: number): string {
  return bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0
    ? `${bytes / (1024 * 1024)} MiB`
    : `${bytes.toLocaleString('en-US')} bytes`;
}

/** Splits a byte stream into `\n`-terminated UTF-8 lines, holding at most `limit` bytes of an unfinished one. */
export class LineSplitter {
  private parts: Buffer[] = [];
  private held = 0;

  private readonly limit: number;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** The complete lines in `chunk` (with what was held before); throws MessageTooLargeError past the cap. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      if (this.held + (nl - start) > this.limit) return this.overflow();
      this.parts.push(chunk.subarray(start, nl));
      const line = Buffer.concat(this.parts).toString('utf8').replace(/\r$/, '');
      this.parts = [];
      this.held = 0;
      if (line.trim() !== '') lines.push(line);
      start = nl + 1;
    }
    if (start < chunk.length) {
      this.held += chunk.length - start;
      if (this.held > this.limit) return this.overflow();
      this.parts.push(chunk.subarray(start));
    }
    return lines;
  }

  private overflow(): never {
    this.parts = [];
    this.held = 0;
    throw new MessageTooLargeError('a message', this.limit);
  }
}

/** A JSON-RPC message the gateway posts, reduced to what the counting fetch needs. */
interface Outgoing {
  id?: string | number;
  method?: string;
  params?: { requestId?: string | number };
}

/** The messages in a POST body the SDK sends (one message or a batch); nothing for other bodies. */
function outgoing(body: unknown): Outgoing[] {
  if (typeof body !== 'string') return [];
  try {
    const parsed = JSON.parse(body) as unknown;
    return (Array.isArray(parsed) ? parsed : [parsed]).filter(
      (m): m is Outgoing => typeof m === 'object' && m !== null,
    );
  } catch {
    return [];
  }
}

/** The gateway gave up on the request this response answers (it timed out and was cancelled). */
export class ResponseCancelledError extends Error {
  constructor(id: string | number) {
    super(`request ${id} was cancelled; the rest of its response is not read`);
    this.name = new.target.name;
  }
}

/**
 * A fetch for the SDK's Streamable HTTP transport whose response bodies are counted: a JSON body over the
 * cap, or one SSE event over it (bytes since the last blank line), errors the body and calls `onOverflow`.
 *
 * It also closes the response stream of a request the gateway cancelled. On a 2025-era connection the SDK
 * answers a timed-out call with `notifications/cancelled` but keeps reading that call's SSE stream, so an
 * upstream trickling one event that never ends held a socket, and up to the cap of memory, per timed-out
 * call for as long as it liked. When the cancellation goes out, the stream of the request it names is cut.
 */
export function limitedFetch(
  limit: number,
  onOverflow: (err: MessageTooLargeError) => void,
  base: typeof fetch = fetch,
): typeof fetch {
  /** How to cut the open response of each request id that is still being read. */
  const open = new Map<string | number, (reason: Error) => void>();
  return async (input, init) => {
    const messages = outgoing(init?.body);
    for (const m of messages) {
      if (m.method === 'notifications/cancelled' && m.params?.requestId !== undefined) {
        const id = m.params.requestId;
        open.get(id)?.(new ResponseCancelledError(id));
      }
    }
    const res = await base(input, init);
    if (!res.body) return res;
    const sse = (res.headers.get('content-type') ?? '').includes('text/event-stream');
    const ids = messages.flatMap((m) => (m.method && m.id !== undefined ? [m.id] : []));
    let size = 0;
    const event: EventState = { size: 0, atLineStart: true, afterCR: false };
    let done = false;
    let stop: TransformStreamDefaultController<Uint8Array> | undefined;
    const finish = () => {
      done = true;
      for (const id of ids) if (open.get(id) === cut) open.delete(id);
    };
    const cut = (reason: Error) => {
      if (done) return;
      finish();
      stop?.error(reason);
    };
    for (const id of ids) open.set(id, cut);
    // `cancel` (the reader gave up) is in the streams standard and Node, not yet in TypeScript's lib.
    const counter: Transformer<Uint8Array, Uint8Array> & { cancel: () => void } = {
      start(controller) {
        stop = controller;
      },
      transform(chunk, controller) {
        if (done) return;
        if (!sse) size += chunk.byteLength;
        else {
          countEvent(chunk, event);
          size = event.size;
        }
        if (size > limit) {
          const err = new MessageTooLargeError(sse ? 'an event' : 'a response', limit);
          finish();
          controller.error(err);
          onOverflow(err);
          return;
        }
        controller.enqueue(chunk);
      },
      flush: finish,
      cancel: finish,
    };
    const counted = res.body.pipeThrough(new TransformStream(counter));
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** Where an SSE stream is between chunks: the current event's size and how the last line ended. */
interface EventState {
  size: number;
  /** No byte of the current line yet (a line end now is a blank line: the event is complete). */
  atLineStart: boolean;
  /** The last byte was "\r" (a "\n" right after it belongs to the same line end). */
  afterCR: boolean;
}

/**
 * Counts one chunk of an SSE stream into `s`: the bytes of the event being received (line ends not counted).
 * A line ends with "\n", "\r" or "\r\n" (the SSE format allows all three); an empty line ends the event.
 */
function countEvent(chunk: Uint8Array, s: EventState): void {
  for (let i = 0; i < chunk.length; i++) {
    const byte = chunk[i];
    if (byte === 10 && s.afterCR) {
      s.afterCR = false;
    } else if (byte === 10 || byte === 13) {
      if (s.atLineStart) s.size = 0;
      s.atLineStart = true;
      s.afterCR = byte === 13;
    } else {
      s.size++;
      s.atLineStart = false;
      s.afterCR = false;
    }
  }
}
