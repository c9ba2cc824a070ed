import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { LoopSnapshot } from '../loop/loop.ts';
import type { TaskStore } from '../store/interface.ts';

// A running task's checkpoints as written (store/checkpoints.ts): each the small state of the loop, and of its
// conversation only what came since the task's last checkpoint here. The first checkpoint of a run (a start, a
// worker going on from another's claim or a pause), or one whose earlier messages are not those the last one
// wrote (anything rewrote or dropped one), writes the whole conversation as a new base.

/**
 * A checkpoint as stored: the offered tools without their descriptions and schemas (going on needs only which
 * toolset each belongs to and what it declares; the next request lists the tools afresh).
 */
export function checkpointOf(snapshot: LoopSnapshot, trace?: LoopSnapshot['trace']): LoopSnapshot {
  const tools = snapshot.pending.tools.map(({ name, toolset, annotations }) => ({
    name,
    toolset,
    annotations,
    description: '',
    parameters: {},
  }));
  return { ...snapshot, ...(trace ? { trace } : {}), pending: { ...snapshot.pending, tools } };
}

/** Whether `now` goes on from `before`: the same messages (the same objects) first, then perhaps more. */
function goesOn(now: readonly ChatCompletionMessageParam[], before: readonly ChatCompletionMessageParam[]) {
  if (now.length < before.length) return false;
  for (let i = 0; i < before.length; i++) if (now[i] !== before[i]) return false;
  return true;
}

/**
 * The task's checkpoint writer: `write` stores `snapshot`'s state and the messages added since the last
 * checkpoint; after `rebase` (a pause, which stores its state whole and drops the parts) the next is a base.
 */
export function checkpointWriter(
  store: Pick<TaskStore, 'checkpoint'>,
  taskId: string,
  trace: () => LoopSnapshot['trace'],
) {
  /** The conversation as the last checkpoint wrote it (its messages, not copies). */
  let written: ChatCompletionMessageParam[] | undefined;
  return {
    write(snapshot: LoopSnapshot): Promise<void> {
      const { messages, ...state } = checkpointOf(snapshot, trace());
      const start = written && goesOn(messages, written) ? written.length : 0;
      written = [...messages];
      return store.checkpoint(taskId, state, snapshot.steps, { start, messages: messages.slice(start) });
    },
    rebase() {
      written = undefined;
    },
  };
}
