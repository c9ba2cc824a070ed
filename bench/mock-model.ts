import http from 'node:http';
import type { AddressInfo } from 'node:net';

// An OpenAI-compatible chat endpoint for the benchmark: it plays a scripted reply per turn of each task and
// records what it was sent, byte for byte, in the order the provider would read it. A task is recognised by
// the marker its goal starts with (`[bench <key>]`); the turn is the number of assistant messages so far.
// A fixed latency makes it a stand-in for a slow model (the concurrency run). Asked with `stream: true` it
// answers as an OpenAI-compatible stream: the reply in pieces of a few characters (a model's tokens), why it
// stopped, the usage, `data: [DONE]`; with a gap between pieces, each goes out on its own after the latency.

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

/** The characters of one streamed piece: about a token of English. */
const PIECE_CHARS = 4;

/** `text` in pieces of PIECE_CHARS characters. */
function pieces(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += PIECE_CHARS) out.push(text.slice(i, i + PIECE_CHARS));
  return out;
}

/** The same reply as `completion`, as the `data:` events of a stream (each with its blank line). */
export function streamEvents(turn: ScriptedTurn | undefined): string[] {
  const whole = completion(turn) as {
    choices: [
      {
        message: {
          content: string | null;
          tool_calls?: { id: string; function: { name: string; arguments: string } }[];
        };
        finish_reason: string;
      },
    ];
    usage: unknown;
  };
  const { message, finish_reason } = whole.choices[0];
  const head = { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 0, model: 'bench' };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    ...head,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const chunks: unknown[] = [chunk({ role: 'assistant', content: message.content === null ? null : '' })];
  for (const p of pieces(message.content ?? '')) chunks.push(chunk({ content: p }));
  for (const [index, call] of (message.tool_calls ?? []).entries()) {
    const { name, arguments: args } = call.function;
    chunks.push(
      chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name, arguments: '' } }] }),
    );
    for (const p of pieces(args)) chunks.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
  }
  chunks.push(chunk({}, finish_reason), { ...head, choices: [], usage: whole.usage });
  return [...chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`), 'data: [DONE]\n\n'];
}

/** Options of the mock model. */
export interface MockModelOptions {
  /** The reply for a task's turn; `tools` are the names the request offered. */
  script(key: string, turn: number, tools: string[]): ScriptedTurn | undefined;
  /** Answer after this long (default 0). */
  latencyMs?: number;
  /** A streamed reply's pieces: this long apart, each written on its own (default 0: all at once). */
  chunkGapMs?: number;
  /** Keep every request body (the token-economics runs); arrival times are always kept. */
  record?: boolean;
}

/** Writes a stream's events: `gapMs` apart, one write each, or all at once. */
function streamOut(res: http.ServerResponse, events: string[], gapMs: number): void {
  if (gapMs <= 0) {
    res.end(events.join(''));
    return;
  }
  let i = 0;
  const next = () => {
    if (res.destroyed) return;
    res.write(events[i++]);
    if (i < events.length) setTimeout(next, gapMs);
    else res.end();
  };
  next();
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
        stream?: boolean;
      };
      const goal = String(parsed.messages.find((m) => m.role === 'user')?.content ?? '');
      const key = MARKER.exec(goal)?.[1] ?? 'unknown';
      const turn = parsed.messages.filter((m) => m.role === 'assistant').length;
      arrivals.push({ key, turn, at: started });
      if (opts.record) requests.push({ key, turn, body, at: started });
      const tools = (parsed.tools ?? []).map((t) => String(t.function?.name));
      const turnReply = opts.script(key, turn, tools);
      const events = parsed.stream ? streamEvents(turnReply) : undefined;
      const text = events ? '' : JSON.stringify(completion(turnReply));
      busyMs += performance.now() - started;
      const send = () => {
        if (events) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          streamOut(res, events, opts.chunkGapMs ?? 0);
          return;
        }
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
