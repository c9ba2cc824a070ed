// fetch() for a party outside toolshift (an identity provider's metadata, keys and tokens): bounded in time and in
// bytes, the whole answer read before it is handed on, so a slow or endless answer costs at most the bound.

export interface Bounds {
  /** The whole exchange, headers and body. */
  timeoutMs: number;
  /** The body's size; a larger one is an error naming the bound. */
  maxBytes: number;
}

/** A fetch with `bounds`; what it answers is a Response over the bytes read (its body already complete). */
export function boundedFetch(bounds: Bounds) {
  // `body` as loose as fetch takes it at run time (typed libraries' fetch types name Uint8Array of any buffer).
  return async (
    input: string | URL | Request,
    init?: Omit<RequestInit, 'body'> & { body?: unknown },
  ): Promise<Response> => {
    const timeout = AbortSignal.timeout(bounds.timeoutMs);
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const res = await fetch(input, { ...init, body: init?.body as BodyInit, signal, redirect: 'manual' });
    const where = new URL(res.url || String(input instanceof Request ? input.url : input)).origin;
    const empty = res.status === 204 || res.status === 205 || res.status === 304;
    const body = res.body && !empty ? await readUpTo(res.body, bounds.maxBytes, where) : null;
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

async function readUpTo(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  where: string,
): Promise<Buffer<ArrayBuffer>> {
  const chunks: Buffer<ArrayBuffer>[] = [];
  let size = 0;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw new Error(`${where} answered more than ${maxBytes} bytes`);
    }
    chunks.push(Buffer.from(value));
  }
  return Buffer.concat(chunks);
}
