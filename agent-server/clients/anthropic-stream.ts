import type { Message, RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages/messages';
import {
  type EventReader,
  MAX_TOOL_CALLS,
  StreamFailure,
  type StreamLimits,
  tooLong,
} from './model-stream.ts';

// A Messages reply asked for as a stream: its events (message_start, content_block_start/delta/stop,
// message_delta, message_stop, ping, error) read as they come, text handed on as it arrives, tool inputs joined
// from their JSON pieces, and put together into the Message a reply without streaming would have been. The
// attempt's deadline and stall watch are model-stream.ts's; the bounds on size are the same.

/** What the events have built so far. */
interface Assembly {
  id?: string;
  model?: string;
  blocks: Map<
    number,
    { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; json: string }
  >;
  chars: number;
  stop?: string | null;
  usage: Record<string, number | null>;
  done: boolean;
}

/** One event's JSON; an `error` event (overloaded mid-stream, say) is a failure to retry. */
function parseEvent(data: string, limits: StreamLimits): RawMessageStreamEvent | { type: 'ping' } {
  let event: { type?: string; error?: { type?: string; message?: string } };
  try {
    event = JSON.parse(data);
  } catch {
    throw new StreamFailure({
      retry: true,
      state: 'error',
      message: `the model endpoint ${limits.endpoint} sent a stream event that is not JSON: ${data.slice(0, 200)}`,
    });
  }
  if (event.type === 'error') {
    const said = `${event.error?.type ?? 'error'}: ${event.error?.message ?? 'no message'}`;
    throw new StreamFailure({
      retry: true,
      state: 'error',
      message: `the model endpoint ${limits.endpoint} sent an error mid-stream: ${said.slice(0, 300)}`,
    });
  }
  return event as RawMessageStreamEvent;
}

/** Usage figures an event carries; a later non-null figure replaces an earlier one. */
function takeUsage(a: Assembly, usage: Record<string, unknown> | undefined) {
  for (const [k, v] of Object.entries(usage ?? {})) if (typeof v === 'number') a.usage[k] = v;
}

/** Adds one event to the reply. */
function take(
  a: Assembly,
  event: RawMessageStreamEvent | { type: 'ping' },
  limits: StreamLimits,
  onDelta?: (text: string) => void,
) {
  const grow = (n: number) => {
    a.chars += n;
    if (a.chars > limits.maxChars) throw tooLong(limits, `${limits.maxChars} characters`);
  };
  switch (event.type) {
    case 'message_start':
      a.id = event.message.id;
      a.model = event.message.model;
      takeUsage(a, event.message.usage as unknown as Record<string, unknown>);
      return;
    case 'content_block_start': {
      const b = event.content_block;
      if (b.type !== 'text' && b.type !== 'tool_use') return;
      if (a.blocks.size >= MAX_TOOL_CALLS) throw tooLong(limits, `${MAX_TOOL_CALLS} tool calls`);
      if (b.type === 'text') {
        grow(b.text.length);
        a.blocks.set(event.index, { type: 'text', text: b.text });
        if (b.text) onDelta?.(b.text);
      } else a.blocks.set(event.index, { type: 'tool_use', id: b.id, name: b.name, json: '' });
      return;
    }
    case 'content_block_delta': {
      const block = a.blocks.get(event.index);
      const d = event.delta;
      if (d.type === 'text_delta' && block?.type === 'text') {
        grow(d.text.length);
        block.text += d.text;
        if (d.text) onDelta?.(d.text);
      } else if (d.type === 'input_json_delta' && block?.type === 'tool_use') {
        grow(d.partial_json.length);
        block.json += d.partial_json;
      }
      return;
    }
    case 'message_delta':
      a.stop = event.delta.stop_reason;
      takeUsage(a, event.usage as unknown as Record<string, unknown>);
      return;
    case 'message_stop':
      a.done = true;
      return;
    default:
  }
}

/** The input a tool call's joined JSON says (an unreadable one is kept whole, for the loop to refuse). */
function inputOf(json: string): unknown {
  try {
    return JSON.parse(json || '{}');
  } catch {
    return { arguments: json };
  }
}

/** The Message the events made. */
function messageOf(a: Assembly): Message {
  const blocks = [...a.blocks.entries()].sort(([x], [y]) => x - y).map(([, b]) => b);
  return {
    id: a.id as string,
    model: a.model as string,
    role: 'assistant',
    type: 'message',
    stop_reason: (a.stop ?? null) as Message['stop_reason'],
    content: blocks.map((b) =>
      b.type === 'text'
        ? { type: 'text', text: b.text, citations: null }
        : { type: 'tool_use', id: b.id, name: b.name, input: inputOf(b.json) },
    ),
    usage: a.usage,
  } as unknown as Message;
}

/**
 * The Messages API's reader (model-stream.ts reads the stream, with its deadline, stall watch and byte bound):
 * events up to `message_stop` into the Message a reply without streaming would have been, text to `onDelta`.
 */
export function anthropicReader(
  limits: StreamLimits,
  onDelta?: (text: string) => void,
): EventReader<Message> {
  const a: Assembly = { blocks: new Map(), chars: 0, usage: {}, done: false };
  return {
    take(data) {
      take(a, parseEvent(data, limits), limits, onDelta);
      return a.done;
    },
    end() {
      if (!a.done || !a.stop) {
        throw new StreamFailure({
          retry: true,
          state: 'error',
          message: `the model endpoint ${limits.endpoint} ended its stream before the reply was complete (no stop_reason)`,
        });
      }
      return messageOf(a);
    },
    whole: (body) => body as Message,
  };
}
