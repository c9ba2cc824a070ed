import http from 'node:http';
import type { AddressInfo } from 'node:net';

// An OpenAI-compatible chat endpoint for the benchmark: it plays a scripted reply per turn of each task and
// records what it was sent, byte for byte, in the order the provider would read it. A task is recognised by
// the marker its goal starts with (`[bench <key>]`); the turn is the number of assistant messages so far.
// A fixed latency makes it a stand-in for a slow model (the concurrency run).

/** One scripted tool call. */
export interface ScriptedCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/** One scripted reply: tool calls, or a final answer. */
export type ScriptedTurn = { calls: ScriptedCall[] } | { answer: string };

/** A request as the model received it. */
export interface RecordedRequest {
  key: string;
  turn: number;
  /** The request body as sent (JSON text). */
  body: string;
  /** When it arrived (performance.now() of this process). */
  at: number;
}

/** The marker a benchmark goal starts with. */
export const goalMarker = (key: string) => `[bench ${key}]`;

const MARKER = /^\[bench ([^\]]+)\]/;

/** The OpenAI chat.completion body for a turn. */
export function completion(turn: ScriptedTurn | undefined): Record<string, unknown> {
  const message =
    turn === undefined
      ? { role: 'assistant', content: 'The script has no more turns.' }
      : 'answer' in turn
        ? { role: 'assistant', content: turn.answer }
        : {
            role: 'assistant',
            content: null,
            tool_calls: turn.calls.map((c) => ({
              id: c.id,
              type: 'function',
              function: { name: c.name, arguments: JSON.stringify(c.arguments) },
            })),
          };
  return {
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 0,
    model: 'bench',
    choices: [{ index: 0, message, finish_reason: 'answer' in (turn ?? {}) ? 'stop' : 'tool_calls' }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

/** Options of the mock model. */
export interface MockModelOptions {
  /** The reply for a task's turn; `tools` are the names the request offered. */
  script(key: string, turn: number, tools: string[]): ScriptedTurn | undefined;
  /** Answer after this long (default 0). */
  latencyMs?: number;
  /** Keep every request body (the token-economics runs); arrival times are always kept. */
  record?: boolean;
}

/** Starts the endpoint on loopback; `url` is the OpenAI base URL (…/v1). */
export function startMockModel(opts: MockModelOptions) {
  const requests: RecordedRequest[] = [];
  const arrivals: { key: string; turn: number; at: number }[] = [];
  let busyMs = 0;
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stats') {
      // For a mock model in another process: when each request arrived.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ arrivals, busyMs }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const started = performance.now();
      const body = Buffer.concat(chunks).toString('utf8');
      const parsed = JSON.parse(body) as {
        messages: { role: string; content: unknown }[];
        tools?: { function?: { name?: string } }[];
      };
      const goal = String(parsed.messages.find((m) => m.role === 'user')?.content ?? '');
      const key = MARKER.exec(goal)?.[1] ?? 'unknown';
      const turn = parsed.messages.filter((m) => m.role === 'assistant').length;
      arrivals.push({ key, turn, at: started });
      if (opts.record) requests.push({ key, turn, body, at: started });
      const tools = (parsed.tools ?? []).map((t) => String(t.function?.name));
      const text = JSON.stringify(completion(opts.script(key, turn, tools)));
      busyMs += performance.now() - started;
      const send = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(text);
      };
      if (opts.latencyMs) setTimeout(send, opts.latencyMs);
      else send();
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise<{
    url: string;
    requests: RecordedRequest[];
    arrivals: typeof arrivals;
    /** Time spent in this process building replies (the model's own share of a step). */
    busyMs: () => number;
    close: () => Promise<void>;
  }>((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
        requests,
        arrivals,
        busyMs: () => busyMs,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      }),
    ),
  );
}
