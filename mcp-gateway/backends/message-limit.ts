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

  constructor(private readonly limit: number) {}

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

/**
 * A fetch for the SDK's Streamable HTTP transport whose response bodies are counted: a JSON body over the
 * cap, or one SSE event over it (bytes since the last blank line), errors the body and calls `onOverflow`.
 */
export function limitedFetch(
  limit: number,
  onOverflow: (err: MessageTooLargeError) => void,
  base: typeof fetch = fetch,
): typeof fetch {
  return async (input, init) => {
    const res = await base(input, init);
    if (!res.body) return res;
    const sse = (res.headers.get('content-type') ?? '').includes('text/event-stream');
    let size = 0;
    let tail = 0; // bytes of "\n" / "\r\n" seen at the end of the last chunk, to find "\n\n" across chunks
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          if (!sse) size += chunk.byteLength;
          else {
            for (const byte of chunk) {
              if (byte === 10) {
                tail++;
                if (tail >= 2) size = 0; // a blank line ends the event
              } else if (byte !== 13) {
                tail = 0;
                size++;
              }
            }
          }
          if (size > limit) {
            const err = new MessageTooLargeError(sse ? 'an event' : 'a response', limit);
            controller.error(err);
            onOverflow(err);
            return;
          }
          controller.enqueue(chunk);
        },
      }),
    );
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
