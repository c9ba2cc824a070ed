import type {
  Response,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseStreamEvent,
} from 'openai/resources/responses/responses';
import {
  type EventReader,
  MAX_TOOL_CALLS,
  StreamFailure,
  type StreamLimits,
  tooLong,
} from './model-stream.ts';

// The Responses API's stream (`stream: true`) read into the one Response a call without streaming returns:
// the text handed on as it comes, function call arguments joined, the response's end (`response.completed`,
// or `response.incomplete` when cut off) bringing its status and usage. An error event or a failed response is
// a failure the retry policy judges, as chat's mid-stream error is; the reply's size is bounded as it grows.

/** The output as its events built it so far, by output index. */
interface Assembly {
  items: Map<number, ResponseOutputItem>;
  chars: number;
  end?: Response;
}

/** The message item at `index`, made when its first text comes before the item was announced. */
function messageAt(a: Assembly, index: number, id: string): ResponseOutputMessage {
  const item = a.items.get(index);
  if (item?.type === 'message') return item;
  const made: ResponseOutputMessage = {
    id,
    type: 'message',
    role: 'assistant',
    status: 'in_progress',
    content: [],
  };
  a.items.set(index, made);
  return made;
}

/** Adds a piece of text (or of a refusal) to the message part it belongs to. */
function addText(
  message: ResponseOutputMessage,
  index: number,
  kind: 'output_text' | 'refusal',
  piece: string,
) {
  const part = message.content[index];
  if (kind === 'output_text') {
    if (part?.type === 'output_text') part.text += piece;
    else message.content[index] = { type: 'output_text', text: piece, annotations: [] };
  } else if (part?.type === 'refusal') part.refusal += piece;
  else message.content[index] = { type: 'refusal', refusal: piece };
}

/** The event's JSON; one that is not JSON is a broken stream (retried). */
function parseEvent(data: string, limits: StreamLimits): ResponseStreamEvent {
  try {
    return JSON.parse(data) as ResponseStreamEvent;
  } catch {
    throw new StreamFailure({
      retry: true,
      state: 'error',
      message: `the model endpoint ${limits.endpoint} sent a stream event that is not JSON: ${data.slice(0, 200)}`,
    });
  }
}

/** An error the provider sent mid-stream (an `error` event, a failed response): retried, with its message. */
function midStream(limits: StreamLimits, said: string | undefined): StreamFailure {
  return new StreamFailure({
    retry: true,
    state: 'error',
    message: `the model endpoint ${limits.endpoint} sent an error mid-stream: ${(said ?? 'no message').slice(0, 300)}`,
  });
}

/** Adds one event to the output; true once the response has ended. */
function take(a: Assembly, e: ResponseStreamEvent, limits: StreamLimits, onDelta?: (text: string) => void) {
  const grow = (n: number) => {
    a.chars += n;
    if (a.chars > limits.maxChars) throw tooLong(limits, `${limits.maxChars} characters`);
  };
  switch (e.type) {
    case 'response.output_item.added':
    case 'response.output_item.done':
      if (!a.items.has(e.output_index) && a.items.size >= MAX_TOOL_CALLS) {
        throw tooLong(limits, `${MAX_TOOL_CALLS} tool calls`);
      }
      // The item as done carries its whole text and arguments: counted as they came, not again.
      a.items.set(e.output_index, structuredClone(e.item));
      return false;
    case 'response.output_text.delta':
    case 'response.refusal.delta':
      grow(e.delta.length);
      addText(
        messageAt(a, e.output_index, e.item_id),
        e.content_index,
        e.type === 'response.output_text.delta' ? 'output_text' : 'refusal',
        e.delta,
      );
      if (e.type === 'response.output_text.delta' && e.delta) onDelta?.(e.delta);
      return false;
    case 'response.function_call_arguments.delta': {
      grow(e.delta.length);
      const call = a.items.get(e.output_index);
      if (call?.type === 'function_call') call.arguments += e.delta;
      return false;
    }
    case 'response.completed':
    case 'response.incomplete':
      a.end = e.response;
      return true;
    case 'response.failed':
      throw midStream(limits, e.response.error?.message);
    case 'error':
      throw midStream(limits, e.message);
    default:
      return false;
  }
}

/**
 * The Responses API's reader: events up to the response's end into one Response, its text to `onDelta`.
 * The end event's own output is taken when it has one (it is the provider's whole account); else what the
 * events built.
 */
export function responsesReader(
  limits: StreamLimits,
  onDelta?: (text: string) => void,
): EventReader<Response> {
  const a: Assembly = { items: new Map(), chars: 0 };
  return {
    take: (data) => take(a, parseEvent(data, limits), limits, onDelta),
    end() {
      if (!a.end) {
        throw new StreamFailure({
          retry: true,
          state: 'error',
          message: `the model endpoint ${limits.endpoint} ended its stream before the reply was complete (no response.completed)`,
        });
      }
      const built = [...a.items.entries()].sort(([x], [y]) => x - y).map(([, item]) => item);
      return { ...a.end, output: a.end.output?.length ? a.end.output : built };
    },
    whole: (body) => body as Response,
  };
}
