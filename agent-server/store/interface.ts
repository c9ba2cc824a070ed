import type { EventType, Task, TaskEvent, TaskStatus } from '../contract.ts';
import type { LoopOutcome } from '../loop/loop.ts';

/** How a task ended, as stored: what its loop ended with. */
export type TaskOutcome = LoopOutcome;

/**
 * The agent-server's persistence, with two implementations: SQLite (store.ts, the embedded default) and
 * PostgreSQL (postgres.ts, when DATABASE_URL names one); tests/agent-server/store/contract.test.ts runs the
 * same suite on both. Writes of a task's creation, pause, resumption and end are durable when they resolve;
 * events are numbered at once and written behind, in batches, and every read sees them.
 */
export interface TaskStore {
  /**
   * Records a new task (durable when it resolves): running, or, with `queued`, waiting for a free slot with
   * what it needs to start later (`request`, kept across a restart).
   */
  createTask(taskId: string, sessionId: string, goal: string, queued?: { request: unknown }): Promise<void>;
  /** Claims a queued task: it is running from now on. False when it is no longer queued (claimed elsewhere, ended). */
  startQueued(taskId: string): Promise<boolean>;
  /** Tasks waiting for a slot, oldest first, with what they need to start. */
  queued(): Promise<{ task: Task; request: unknown }[]>;
  /**
   * Records an event of a task created, or found awaiting, through this store, numbered after its last one;
   * returns it as readers will see it. The write itself is batched (a failure goes to the store's onWriteError).
   */
  appendEvent(
    taskId: string,
    type: EventType,
    durationMs: number | null,
    data: Record<string, unknown>,
  ): TaskEvent;
  /** Records that the task waits for `pending`, with the loop state to resume from. */
  pause(taskId: string, pending: unknown, state: unknown): Promise<void>;
  /**
   * The task goes on after its pause: true for the one caller that moves it from awaiting to running (of
   * several processes resuming it, one goes on).
   */
  unpause(taskId: string): Promise<boolean>;
  /** Tasks paused for an approval, with what they wait for and their saved loop state. */
  awaiting(): Promise<{ task: Task; pending: unknown; state: unknown }[]>;
  /** Records how the task ended. */
  finishTask(taskId: string, outcome: TaskOutcome): Promise<void>;
  getTask(taskId: string): Promise<Task | undefined>;
  /** The task's events after `after` (a seq), in order. */
  events(taskId: string, after?: number): Promise<TaskEvent[]>;
  /** The newest tasks first. */
  recentTasks(limit: number): Promise<Task[]>;
  /** Marks tasks a stopped process left running as failed; returns how many. */
  failInterrupted(): Promise<number>;
  /** Deletes up to `limit` finished tasks (with their events) older than `before`; returns how many. */
  pruneTasks(before: string, limit: number): Promise<number>;
  /** Commits the batched writes now. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** A task as both stores keep its row: JSON columns as text. */
export interface TaskRow {
  request?: string | null;
  pending_approval?: string | null;
  resume_state?: string | null;
  task_id: string;
  session_id: string;
  goal: string;
  status: TaskStatus;
  final_answer: string | null;
  error: string | null;
  steps: number;
  usage: string;
  toolsets_used: string;
  tokens: string | null;
  created_at: string;
  finished_at: string | null;
}

/** A stored row as the contract's Task. */
export function toTask({ pending_approval: _p, resume_state: _r, request: _q, ...row }: TaskRow): Task {
  return {
    ...row,
    usage: JSON.parse(row.usage),
    toolsets_used: JSON.parse(row.toolsets_used),
    tokens: row.tokens ? JSON.parse(row.tokens) : null,
  };
}
