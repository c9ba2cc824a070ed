import type { TaskStatus } from '../contract.ts';

// Threads as the store keeps them (store/threads.ts); interface.ts re-exports them with the rest of the store's
// contract.

/** How a thread's compaction stands (agent-server/loop/context.ts makes and reads it; each transcript keeps it). */
export interface ThreadContext {
  /** The summary of the conversation's first messages, and how many it stands for (after the system prompt). */
  summary?: string;
  summarised?: number;
  /** The positions of tool results moved out of the context (the model reads them back by their handle). */
  stubbed?: number[];
}

/** A thread as stored. */
export interface StoredThread {
  thread_id: string;
  session_id: string;
  owner: string;
  title: string;
  webhook: { url: string } | null;
  created_at: string;
  updated_at: string;
}

/** A task of a thread, as its turn. */
export interface ThreadTurnRow {
  task_id: string;
  goal: string;
  status: TaskStatus;
  final_answer: string | null;
  error: string | null;
  created_at: string;
  finished_at: string | null;
}

/** The thread a new task is a turn of: an existing one, or one made with the task (`made`). */
export interface TaskThread {
  id: string;
  made?: { owner: string; title: string; webhook: { url: string } | null };
}
