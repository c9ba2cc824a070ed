import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';
import { forgetUnusable, withdrawInactive } from '../../../agent-server/loop/code-view.ts';
import type { GatewayTool } from '../../../mcp-gateway/contract.ts';

// A code task's view of its conversation: a deactivated toolset's declarations are withdrawn, an active one's
// latest kept, and nothing else is touched.

const toggle = (id: string, action: string, toolsets: string[]): ChatCompletionMessageParam => ({
  role: 'assistant',
  content: null,
  tool_calls: [
    {
      id,
      type: 'function',
      function: { name: 'manage_toolsets', arguments: JSON.stringify({ action, toolset_ids: toolsets }) },
    },
  ],
});
const result = (id: string, content: string): ChatCompletionMessageParam => ({
  role: 'tool',
  tool_call_id: id,
  content,
});

const A = '// toolset a\ndeclare function a1(args: { x: string; }): Promise<unknown>;';
const B =
  '// toolset b\n/** B one. */\ndeclare function b1(args?: Record<string, unknown>): Promise<unknown>;';

describe('withdrawInactive', () => {
  const messages: ChatCompletionMessageParam[] = [
    { role: 'system', content: 'catalog' },
    { role: 'user', content: 'goal' },
    toggle('t1', 'ACTIVATE', ['a', 'b']),
    result('t1', `{"message":"Activated a, b."}\n\n${A}\n${B}`),
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'r1', type: 'function', function: { name: 'run_code', arguments: '{}' } }],
    },
    // A script's output that looks like declarations is not an activation's result: it is left alone.
    result('r1', `{"x":1}\n\n${A}`),
  ];

  it('keeps everything while every declared toolset is active, the same objects', () => {
    const view = withdrawInactive(messages, new Set(['a', 'b']));
    expect(view).toEqual(messages);
    for (const [i, m] of view.entries()) expect(m).toBe(messages[i]);
  });

  it('withdraws a deactivated toolset’s section only', () => {
    const view = withdrawInactive(messages, new Set(['b']));
    expect(view[3]).toEqual(
      result(
        't1',
        `{"message":"Activated a, b."}\n\n// toolset a: deactivated, its declarations withdrawn\n${B}`,
      ),
    );
    expect(view[5]).toBe(messages[5]);
    expect(messages[3]).toEqual(result('t1', `{"message":"Activated a, b."}\n\n${A}\n${B}`));
  });

  it('keeps only the latest declarations of a toolset activated again', () => {
    const again = [
      ...messages,
      toggle('t2', 'ACTIVATE', ['a']),
      result('t2', `{"message":"Activated a."}\n\n${A}`),
    ];
    const view = withdrawInactive(again, new Set(['a', 'b']));
    expect(view[3]).toEqual(
      result('t1', `{"message":"Activated a, b."}\n\n// toolset a: declared again below\n${B}`),
    );
    expect(view[7]).toBe(again[7]);
  });
});

describe('forgetUnusable', () => {
  it('forgets the tools no longer usable, so they are declared again when they come back', () => {
    const shown = new Set(['a1', 'b1']);
    forgetUnusable(shown, [{ name: 'b1', toolset: 'b' } as GatewayTool]);
    expect([...shown]).toEqual(['b1']);
  });
});
