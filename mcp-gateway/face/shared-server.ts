import {
  isInitializeRequest,
  isJSONRPCRequest,
  isJsonContentType,
  type JSONRPCMessage,
  type JSONRPCRequest,
  type MessageExtraInfo,
  parseJSONRPCMessage,
  type Server,
  SUPPORTED_PROTOCOL_VERSIONS,
  type Transport,
} from '@modelcontextprotocol/server';

// One long-lived server for a fixed view's 2025-era requests (a view's server holds nothing of a client: it acts
// in the view's own gateway session, whoever calls). The SDK's stateless serving builds a Server, its handlers
// and a transport for every request and tears them down after it, and the teardown makes an Error with its stack
// each time (the protocol layer's "Connection closed", for requests nobody is waiting on). Here a request the
// stateless transport would answer with one JSON body (a single request, not initialize) is handed to the shared
// server under an id of the face's own, so that two clients' equal ids cannot meet, and its answer comes back
// under the client's id. Anything else (initialize, notifications, batches, responses, a GET, a malformed
// message or header) takes the SDK's per-request path, which answers it exactly as before.

/** What a request must look like for the shared server: its parsed message, or undefined for the SDK's path. */
function sharedRequest(
  request: Pick<Request, 'method' | 'headers'>,
  parsedBody: unknown,
  supported: readonly string[],
): JSONRPCRequest | undefined {
  if (request.method !== 'POST' || parsedBody === null || typeof parsedBody !== 'object') return undefined;
  if (Array.isArray(parsedBody)) return undefined;
  // The stateless transport's own checks, in its order; a request failing one is left to it to refuse.
  const accept = request.headers.get('accept');
  if (!accept?.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
  if (!isJsonContentType(request.headers.get('content-type'))) return undefined;
  const version = request.headers.get('mcp-protocol-version');
  if (version !== null && !supported.includes(version)) return undefined;
  let message: JSONRPCMessage;
  try {
    message = parseJSONRPCMessage(parsedBody);
  } catch {
    return undefined;
  }
  return isJSONRPCRequest(message) && !isInitializeRequest(message) ? message : undefined;
}

type Answer = (message: JSONRPCMessage) => void;

/** A server connected once to a transport that carries many requests, each answered as one JSON-RPC message. */
export interface SharedServer {
  /**
   * The message of a request the shared server answers as the stateless transport would (a single JSON-RPC
   * request other than initialize, with the headers that transport requires); undefined for any other.
   */
  accepts(request: Pick<Request, 'method' | 'headers'>, parsedBody: unknown): JSONRPCRequest | undefined;
  /** The server's answer to `message` (under the client's id), as the stateless transport's JSON body. */
  answer(message: JSONRPCRequest, extra: MessageExtraInfo): Promise<Response>;
  close(): Promise<void>;
}

export function sharedServer(server: Server): SharedServer {
  const waiting = new Map<number, Answer>();
  let next = 0;
  let closed = false;
  let supported: readonly string[] = SUPPORTED_PROTOCOL_VERSIONS;
  const transport: Transport = {
    start: async () => undefined,
    setSupportedProtocolVersions: (versions) => {
      supported = versions;
    },
    // Only answers are delivered: a notification or a request of the server's during a call goes nowhere, as it
    // goes nowhere in the stateless transport's JSON mode. (What is sent here is the protocol layer's own making:
    // anything with a method is one of those, anything else an answer.)
    async send(message) {
      if ('method' in message || !('id' in message)) return;
      const answer = waiting.get(message.id as number);
      if (!answer) return;
      waiting.delete(message.id as number);
      answer(message);
    },
    async close() {
      closed = true;
      const pending = [...waiting.values()];
      waiting.clear();
      for (const answer of pending) {
        answer({ jsonrpc: '2.0', id: 0, error: { code: -32000, message: 'The MCP face is closing' } });
      }
      transport.onclose?.();
    },
  };
  const connected = server.connect(transport);
  return {
    accepts: (request, parsedBody) => sharedRequest(request, parsedBody, supported),
    async answer(message, extra) {
      await connected;
      // Closed (the face is stopping): answered at once, never left waiting for a server that is gone.
      if (closed) {
        const error = { code: -32000, message: 'The MCP face is closing' };
        return Response.json({ jsonrpc: '2.0', id: message.id, error }, { status: 200 });
      }
      const id = ++next;
      const answered = new Promise<JSONRPCMessage>((resolve) => waiting.set(id, resolve));
      transport.onmessage?.({ ...message, id }, extra);
      const reply = { ...(await answered), id: message.id };
      return Response.json(reply, { status: 200, headers: { 'Content-Type': 'application/json' } });
    },
    close: () => server.close(),
  };
}
