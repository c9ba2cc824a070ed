import { describe, expect, it } from 'vitest';
import type { LoopSnapshot } from '../../../agent-server/loop/state.ts';
import type { CheckpointPart } from '../../../agent-server/store/interface.ts';
import { checkpointWriter } from '../../../agent-server/tasks/checkpoint.ts';

// What a running task's checkpoints hand the store (tasks/checkpoint.ts): the loop's state without its
// conversation, and the messages added since the last checkpoint; a base (from 0) first, after a pause, or when an
// earlier message is no longer the one written.

type Written = { state: Record<string, unknown>; steps: number; part?: CheckpointPart };

function writerOf() {
  const written: Written[] = [];
  const store = {
    checkpoint: async (_task: string, state: unknown, steps: number, part?: CheckpointPart) => {
      written.push({ state: state as Record<string, unknown>, steps, part });
    },
  };
  return { written, writer: checkpointWriter(store, 'task_1', () => ({ parent: 'p', attempt: 2 })) };
}

const snapshot = (messages: LoopSnapshot['messages'], steps: number): LoopSnapshot => ({
  messages,
  steps,
  usage: { prompt_tokens: steps, completion_tokens: 0, total_tokens: steps },
  tokens: {} as LoopSnapshot['tokens'],
  used: [],
  pending: {
    step: steps,
    calls: [],
    index: 0,
    done: [],
    tools: [
      { name: 't', toolset: 'files', description: 'long', parameters: { type: 'object' }, annotations: {} },
    ],
  },
});

describe('a task’s checkpoints', () => {
  it('write a base first, then only what each step added, and the state without the conversation', async () => {
    const { written, writer } = writerOf();
    const messages: LoopSnapshot['messages'] = [
      { role: 'system', content: 's' },
      { role: 'user', content: 'goal' },
    ];
    await writer.write(snapshot(messages, 1));
    messages.push({ role: 'assistant', content: 'a' }, { role: 'tool', tool_call_id: 'c', content: 'r' });
    await writer.write(snapshot(messages, 2));
    messages.push({ role: 'assistant', content: 'b' });
    await writer.write(snapshot(messages, 3));
    expect(written.map((w) => [w.part?.start, w.part?.messages.length, w.steps])).toEqual([
      [0, 2, 1],
      [2, 2, 2],
      [4, 1, 3],
    ]);
    expect(written[2].part?.messages).toEqual([{ role: 'assistant', content: 'b' }]);
    expect(written[0].state.messages).toBeUndefined();
    expect(written[0].state.trace).toEqual({ parent: 'p', attempt: 2 });
    // The offered tools keep what going on needs, not their descriptions and schemas.
    expect((written[0].state.pending as LoopSnapshot['pending']).tools).toEqual([
      { name: 't', toolset: 'files', annotations: {}, description: '', parameters: {} },
    ]);
  });

  it('write a base when an earlier message changed, or after a pause', async () => {
    const { written, writer } = writerOf();
    const messages: LoopSnapshot['messages'] = [
      { role: 'system', content: 's' },
      { role: 'user', content: 'goal' },
    ];
    await writer.write(snapshot(messages, 1));
    messages[1] = { role: 'user', content: 'goal, rewritten' };
    messages.push({ role: 'assistant', content: 'a' });
    await writer.write(snapshot(messages, 2));
    messages.push({ role: 'assistant', content: 'b' });
    await writer.write(snapshot(messages, 3));
    // A conversation shorter than the last one written is not an append either.
    await writer.write(snapshot(messages.slice(0, 2), 4));
    writer.rebase();
    await writer.write(snapshot(messages.slice(0, 2), 5));
    expect(written.map((w) => [w.part?.start, w.part?.messages.length])).toEqual([
      [0, 2],
      [0, 3],
      [3, 1],
      [0, 2],
      [0, 2],
    ]);
  });
});
