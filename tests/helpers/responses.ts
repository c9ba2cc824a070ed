import { HttpResponse, http } from 'msw';
import type {
  ResponseCreateParamsBase,
  ResponseOutputItem,
  ResponseStreamEvent,
  ResponseUsage,
} from 'openai/resources/responses/responses';
import { z } from 'zod';
import { MODEL_BASE_URL, type modelEdge, streamed } from './msw.ts';

// The OpenAI Responses API's edge, scripted: every request body is checked against a schema of what toolshift
// may send (written from the SDK's ResponseCreateParams; tsc fails below when the two drift), then answered
// with the next scripted reply (a Response, a stream of events, or an HTTP error).

const Text = z.strictObject({ type: z.literal('input_text'), text: z.string() });
const Image = z.strictObject({
  type: z.literal('input_image'),
  image_url: z.string(),
  detail: z.enum(['low', 'high', 'auto', 'original']),
});
const Message = z.strictObject({
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(z.union([Text, Image])).min(1)]),
});
const FunctionCall = z.strictObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});
const FunctionCallOutput = z.strictObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: z.string(),
});
const FunctionTool = z.strictObject({
  type: z.literal('function'),
  name: z.string().min(1),
  description: z.string().optional(),
  parameters: z.record(z.string(), z.unknown()).nullable(),
  strict: z.literal(false),
});

/** What toolshift sends to `POST /responses`: stateless (`store: false`), the whole conversation each time. */
export const ResponsesRequest = z.strictObject({
  model: z.string().min(1),
  instructions: z.string().optional(),
  input: z.array(z.union([Message, FunctionCall, FunctionCallOutput])),
  tools: z.array(FunctionTool).min(1).optional(),
  store: z.literal(false),
  prompt_cache_key: z.string().min(1).optional(),
  stream: z.boolean().optional(),
});
export type ResponsesRequest = z.output<typeof ResponsesRequest>;

// Compile-time: a body the schema accepts is one the SDK's types accept (tsc fails when they drift apart).
type Assignable<T extends U, U> = T;
export type SdkAccepts = Assignable<ResponsesRequest, ResponseCreateParamsBase>;

/** Usage as the API reports it; `cached` prompt tokens served from the cache. */
export function usage(input: number, output: number, cached = 0): ResponseUsage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached, cache_write_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/** A message output item with text (and a refusal, if given). */
export function message(text: string | null, refusal?: string): ResponseOutputItem {
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    status: 'completed',
    content: [
      ...(text !== null ? [{ type: 'output_text' as const, text, annotations: [] }] : []),
      ...(refusal !== undefined ? [{ type: 'refusal' as const, refusal }] : []),
    ],
  };
}

/** A function call output item. */
export function functionCall(callId: string, name: string, args: unknown): ResponseOutputItem {
  return {
    id: `fc_${callId}`,
    type: 'function_call',
    call_id: callId,
    name,
    arguments: JSON.stringify(args),
    status: 'completed',
  };
}

/** A whole Response as the API returns it. */
export function response(
  output: ResponseOutputItem[],
  extra: { usage?: ResponseUsage; status?: 'completed' | 'incomplete'; reason?: 'max_output_tokens' } = {},
) {
  return {
    id: 'resp_test',
    object: 'response',
    created_at: 0,
    model: 'test-model',
    status: extra.status ?? 'completed',
    error: null,
    incomplete_details: extra.reason ? { reason: extra.reason } : null,
    instructions: null,
    metadata: null,
    output,
    parallel_tool_calls: true,
    temperature: null,
    tool_choice: 'auto',
    tools: [],
    top_p: null,
    usage: extra.usage ?? usage(100, 10),
  };
}

let sequence = 0;
/** One stream event (the sequence number filled in). */
export function event(e: Record<string, unknown> & { type: ResponseStreamEvent['type'] }) {
  return { ...e, sequence_number: sequence++ };
}

/**
 * A streamed reply: each text as its deltas, each call as its item and argument deltas, then the end event
 * (`final`: its response; its output left empty, as the events already said it, unless `withOutput`).
 */
export function eventsOf(
  parts: ({ text: string[] } | { call: { id: string; name: string; args: string[] } })[],
  final: ReturnType<typeof response>,
  type: 'response.completed' | 'response.incomplete' = 'response.completed',
) {
  const events: unknown[] = [event({ type: 'response.created', response: { ...final, output: [] } })];
  parts.forEach((part, i) => {
    if ('text' in part) {
      events.push(event({ type: 'response.output_item.added', output_index: i, item: message('') }));
      for (const delta of part.text) {
        events.push(
          event({
            type: 'response.output_text.delta',
            output_index: i,
            item_id: 'msg_1',
            content_index: 0,
            delta,
          }),
        );
      }
    } else {
      const { id, name, args } = part.call;
      const item = { ...functionCall(id, name, {}), arguments: '', status: 'in_progress' };
      events.push(event({ type: 'response.output_item.added', output_index: i, item }));
      for (const delta of args) {
        events.push(
          event({
            type: 'response.function_call_arguments.delta',
            output_index: i,
            item_id: `fc_${id}`,
            delta,
          }),
        );
      }
    }
  });
  events.push(event({ type, response: { ...final, output: [] } }));
  return events;
}

/** A scripted reply: a Response body, a list of stream events, or a Response made by hand (an error). */
export type Scripted = ReturnType<typeof response> | { events: unknown[] } | Response;

/**
 * Serves `POST /responses` from `script`, one reply per request; each body is checked against the schema
 * (a body that fails answers 400 with the issues, and is kept in `invalid`).
 */
export function scriptResponses(server: ReturnType<typeof modelEdge>, script: Scripted[]) {
  const requests: ResponsesRequest[] = [];
  const invalid: unknown[] = [];
  server.use(
    http.post(`${MODEL_BASE_URL}/responses`, async ({ request }) => {
      const body: unknown = await request.json();
      const parsed = ResponsesRequest.safeParse(body);
      if (!parsed.success) {
        invalid.push({ body, issues: parsed.error.issues });
        return HttpResponse.json({ error: { message: parsed.error.message } }, { status: 400 });
      }
      requests.push(parsed.data);
      const next = script.shift();
      if (!next) return HttpResponse.json({ error: { message: 'script ended' } }, { status: 500 });
      if (next instanceof Response) return next;
      if ('events' in next) return streamed(next.events);
      return HttpResponse.json(next);
    }),
  );
  return { requests, invalid };
}
