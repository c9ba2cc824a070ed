import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';
import { paramsOf } from '../../../agent-server/clients/anthropic-map.ts';
import { breakpoints, MessageCreateParamsSchema, protocolErrors } from '../../helpers/anthropic.ts';

// The conversation as a Messages request, beyond what the scripted endpoint's tests send: what the API would
// refuse (blank text, roles in a row, a tool result without its call) never leaves toolshift.

const valid = (messages: ChatCompletionMessageParam[]) => {
  const params = MessageCreateParamsSchema.parse(paramsOf({ model: 'm', messages, tools: [] }, 100));
  expect(protocolErrors(params)).toEqual([]);
  return params;
};

describe('the Messages request of a conversation', () => {
  it('merges tool results and the note after them into one user turn, and drops blank text', () => {
    const p = valid([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'goal' },
      {
        role: 'assistant',
        content: '  ',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'a', arguments: '{"x":1}' } },
          { id: 'c2', type: 'function', function: { name: 'b', arguments: 'not json' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'one' },
      { role: 'tool', tool_call_id: 'c2', content: '' },
      { role: 'user', content: 'Your previous reply was cut off.' },
      { role: 'system', content: 'a note' },
    ]);
    expect(p.messages).toHaveLength(3);
    expect(p.messages[1]?.content).toEqual([
      { type: 'tool_use', id: 'c1', name: 'a', input: { x: 1 } },
      { type: 'tool_use', id: 'c2', name: 'b', input: { arguments: 'not json' } },
    ]);
    expect(p.messages[2]?.content).toEqual([
      { type: 'tool_result', tool_use_id: 'c1', content: 'one' },
      { type: 'tool_result', tool_use_id: 'c2', content: '(no output)' },
      { type: 'text', text: 'Your previous reply was cut off.' },
      { type: 'text', text: '[system] a note', cache_control: { type: 'ephemeral' } },
    ]);
    // No tools: the system prompt and the two user turns (the first is the previous request's end).
    expect(breakpoints(p)).toEqual(['system.0', 'messages.0.0', 'messages.2.3']);
  });

  it('a conversation without a system prompt or tools sends neither', () => {
    const p = valid([{ role: 'user', content: 'hi' }]);
    expect(p).not.toHaveProperty('system');
    expect(p).not.toHaveProperty('tools');
    expect(breakpoints(p)).toEqual(['messages.0.0']);
  });
});
