import { HttpError } from '../http/http-error.ts';
import type { LimitSubject } from './limits.ts';
import type { IdentityStore } from './store.ts';

// A running task's share of its owner's limits (lib/identity/limits.ts): its model calls count their tokens
// against the user's and their teams' model_tokens_per_day, and its tool calls against tool_calls_per_minute.

/** What a task's loop asks before and after what its owner's limits count (LimitReached when spent). */
export interface Quota {
  /** Before a model call: refused once the day's model tokens are spent. */
  beforeModel(): Promise<void>;
  /** After a model call: its tokens counted. */
  afterModel(tokens: number): Promise<void>;
  /** Before a tool call: one counted, refused past the minute's limit. */
  beforeToolCall(): Promise<void>;
}

/** The quota of a task whose thread `owner` is (`user:<id>` for a user's key); undefined when nothing limits it. */
export async function quotaOf(store: IdentityStore, owner: string): Promise<Quota | undefined> {
  if (!owner.startsWith('user:')) return undefined;
  const subjects: LimitSubject[] = await store.subjectsOf(owner.slice('user:'.length));
  // A user removed since their task was recorded: it does nothing more on their behalf.
  if (subjects.length === 0) return removed();
  if (subjects.every((s) => Object.keys(s.limits).length === 0)) return undefined;
  return {
    beforeModel: () => store.refuseIfSpent(subjects, 'model_tokens_per_day'),
    afterModel: (tokens) => store.add(subjects, 'model_tokens_per_day', tokens),
    beforeToolCall: () => store.charge(subjects, 'tool_calls_per_minute'),
  };
}

/** The quota of a task whose user was removed: every model and tool call refused, saying why. */
function removed(): Quota {
  const refuse = async () => {
    throw new HttpError(403, 'the user this task runs for was removed: it goes no further');
  };
  return { beforeModel: refuse, afterModel: async () => {}, beforeToolCall: refuse };
}
