import type { MessageCreateParamsBase } from '@anthropic-ai/sdk/resources/messages/messages';
import { HttpResponse, http } from 'msw';
import type { SetupServer } from 'msw/node';
import { z } from 'zod';

// A scripted Anthropic Messages endpoint for msw: each request is checked against the API's request schema
// (written from the official SDK's MessageCreateParams types, and held to them at compile time below) and the
// API's own rules toolshift must keep (roles alternate from the user, every tool result answers a tool_use of
// the turn before, at most four cache_control breakpoints); then the script's next reply is sent, as one
// Message or as the API's event stream.

export const ANTHROPIC_BASE_URL = 'http://anthropic.test';
export const MESSAGES_URL = `${ANTHROPIC_BASE_URL}/v1/messages`;

const CacheControl = z.strictObject({ type: z.literal('ephemeral'), ttl: z.enum(['5m', '1h']).optional() });
const TextBlock = z.strictObject({
  type: z.literal('text'),
  // The API refuses an empty text block.
  text: z.string().min(1),
  cache_control: CacheControl.nullable().optional(),
});
const ToolUseBlock = z.strictObject({
  type: z.literal('tool_use'),
  id: z.string().regex(/^[a-zA-Z0-9_-]+$/),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
  cache_control: CacheControl.nullable().optional(),
});
const ToolResultBlock = z.strictObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string().regex(/^[a-zA-Z0-9_-]+$/),
  content: z.union([z.string(), z.array(TextBlock)]).optional(),
  is_error: z.boolean().optional(),
  cache_control: CacheControl.nullable().optional(),
});
const Block = z.discriminatedUnion('type', [TextBlock, ToolUseBlock, ToolResultBlock]);
const MessageParam = z.strictObject({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string().min(1), z.array(Block).min(1)]),
});
const Tool = z.strictObject({
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,128}$/),
  description: z.string().optional(),
  input_schema: z.looseObject({ type: z.literal('object') }),
  cache_control: CacheControl.nullable().optional(),
});
export const MessageCreateParamsSchema = z.strictObject({
  model: z.string().min(1),
  max_tokens: z.number().int().min(1),
  messages: z.array(MessageParam).min(1),
  system: z.union([z.string(), z.array(TextBlock)]).optional(),
  tools: z.array(Tool).optional(),
  stream: z.boolean().optional(),
});

/** Fails to compile when the schema accepts what the SDK's request type does not. */
export const heldToSdk = (p: z.output<typeof MessageCreateParamsSchema>): MessageCreateParamsBase => p;

type Params = z.output<typeof MessageCreateParamsSchema>;
/** …and when it names a field the SDK's request type does not have. */
type Unknown = Exclude<keyof Params, keyof MessageCreateParamsBase>;
export const noUnknownFields: [Unknown] extends [never] ? true : never = true;

/** The API's rules beyond the shape: what the endpoint would refuse with a 400. */
export function protocolErrors(p: Params): string[] {
  const errors: string[] = [];
  p.messages.forEach((m, i) => {
    const expected = i % 2 === 0 ? 'user' : 'assistant';
    if (m.role !== expected) errors.push(`messages.${i}: role ${m.role}, the turns must alternate from user`);
    if (typeof m.content === 'string') return;
    const before = p.messages[i - 1];
    const asked = new Set(
      before && typeof before.content !== 'string'
        ? before.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []))
        : [],
    );
    for (const b of m.content) {
      if (b.type === 'tool_result' && !asked.has(b.tool_use_id)) {
        errors.push(`messages.${i}: tool_result ${b.tool_use_id} answers no tool_use of the turn before`);
      }
      if (b.type !== 'text' && m.role === 'assistant' && b.type === 'tool_result') {
        errors.push(`messages.${i}: a tool_result in an assistant turn`);
      }
    }
  });
  const marks = breakpoints(p).length;
  if (marks > 4) errors.push(`${marks} cache_control breakpoints (at most 4)`);
  return errors;
}

/** Where the request's cache_control breakpoints are: `tools.N`, `system.N`, `messages.N.M`. */
export function breakpoints(p: Params): string[] {
  const at: string[] = [];
  for (const [i, t] of (p.tools ?? []).entries()) if (t.cache_control) at.push(`tools.${i}`);
  for (const [i, b] of (Array.isArray(p.system) ? p.system : []).entries()) {
    if (b.cache_control) at.push(`system.${i}`);
  }
  for (const [i, m] of p.messages.entries()) {
    if (typeof m.content === 'string') continue;
    for (const [j, b] of m.content.entries()) if (b.cache_control) at.push(`messages.${i}.${j}`);
  }
  return at;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

type ReplyBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

/** One scripted reply: its blocks, why it stopped, its usage. */
export interface ScriptedReply {
  content: ReplyBlock[];
  stop_reason?: string;
  usage?: Usage;
}

export const text = (t: string, usage?: Usage): ScriptedReply => ({
  content: [{ type: 'text', text: t }],
  usage,
});
export const toolUse = (
  id: string,
  name: string,
  input: Record<string, unknown>,
  usage?: Usage,
): ScriptedReply => ({
  content: [{ type: 'tool_use', id, name, input }],
  stop_reason: 'tool_use',
  usage,
});

const DEFAULT_USAGE: Usage = { input_tokens: 100, output_tokens: 10 };

/** The Message a reply is, as the API returns it without streaming. */
export function messageBody(r: ScriptedReply, model = 'claude-test') {
  const u = { cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...(r.usage ?? DEFAULT_USAGE) };
  return {
    id: 'msg_test',
    type: 'message',
    role: 'assistant',
    model,
    content: r.content.map((b) => (b.type === 'text' ? { ...b, citations: null } : b)),
    stop_reason: r.stop_reason ?? 'end_turn',
    stop_sequence: null,
    usage: u,
  };
}

/** The events a reply streams as: text in pieces, tool inputs as input_json_delta pieces, usage at start and end. */
export function streamEvents(r: ScriptedReply, model = 'claude-test'): unknown[] {
  const u = { cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...(r.usage ?? DEFAULT_USAGE) };
  const events: unknown[] = [
    {
      type: 'message_start',
      message: {
        ...messageBody({ content: [] }, model),
        stop_reason: null,
        usage: { ...u, output_tokens: 1 },
      },
    },
    { type: 'ping' },
  ];
  r.content.forEach((b, index) => {
    if (b.type === 'text') {
      events.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      for (const piece of b.text.split(/(?<= )/)) {
        events.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } });
      }
    } else {
      events.push({ type: 'content_block_start', index, content_block: { ...b, input: {} } });
      const json = JSON.stringify(b.input);
      for (let i = 0; i < json.length; i += 7) {
        events.push({
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: json.slice(i, i + 7) },
        });
      }
    }
    events.push({ type: 'content_block_stop', index });
  });
  events.push({
    type: 'message_delta',
    delta: { stop_reason: r.stop_reason ?? 'end_turn', stop_sequence: null },
    usage: { output_tokens: u.output_tokens },
  });
  events.push({ type: 'message_stop' });
  return events;
}

/** An SSE body of events, each `event: <type>` with its JSON. */
export function sse(events: unknown[]): HttpResponse<string> {
  const body = events
    .map((e) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`)
    .join('');
  return new HttpResponse(body, { headers: { 'content-type': 'text/event-stream' } });
}

/** An Anthropic error body with its status and headers. */
export function apiError(
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
) {
  return HttpResponse.json({ type: 'error', error: { type, message } }, { status, headers });
}

/** A step of the script: a reply (sent as the request asks: streamed or not) or a response of its own. */
export type Step = ScriptedReply | (() => Response);

/**
 * Serves the script at the Messages URL: each request is validated first (an invalid one fails the test through
 * `invalid`, and is answered 400 as the API would), then answered by the next step.
 */
export function scriptAnthropic(server: SetupServer, steps: Step[]) {
  const requests: Params[] = [];
  const invalid: string[] = [];
  const headers: Headers[] = [];
  server.use(
    http.post(MESSAGES_URL, async ({ request }) => {
      headers.push(request.headers);
      const parsed = MessageCreateParamsSchema.safeParse(await request.json());
      const errors = parsed.success
        ? protocolErrors(parsed.data)
        : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
      if (errors.length > 0 || !parsed.success) {
        invalid.push(...errors);
        return apiError(400, 'invalid_request_error', errors.join('; '));
      }
      requests.push(parsed.data);
      const step = steps.shift();
      if (!step) return apiError(500, 'api_error', 'the script has no more replies');
      if (typeof step === 'function') return step();
      return parsed.data.stream
        ? sse(streamEvents(step, parsed.data.model))
        : HttpResponse.json(messageBody(step));
    }),
  );
  return { requests, invalid, headers };
}
