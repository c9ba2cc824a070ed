import { type ExecuteTaskResponse, isLive, type Task } from '../contract.ts';
import type { LoopOutcome } from '../loop/loop.ts';
import { noTokens, noUsage } from '../loop/state.ts';

// How a task's end is told: the answer a stored task gives, a loop that crashed, the agent-server stopping.

/** The reason a task's loop is stopped when the agent-server itself stops. */
export class AgentShutdown extends Error {
  constructor() {
    super('the agent-server stopped');
    this.name = new.target.name;
  }
}

/**
 * The reason a task's loop stops here: it goes on in another worker sharing the store (it resumed the paused
 * task first, or this worker lost the task's lease).
 */
export class ResumedElsewhere extends Error {
  constructor(why = 'another agent-server resumed the task') {
    super(why);
    this.name = new.target.name;
  }
}

/** A task's answer as stored: what the blocking call returns and what an event stream ends with. */
export function resultOf(task: Task): ExecuteTaskResponse {
  return {
    status: isLive(task.status) ? 'failed' : task.status,
    final_answer: task.final_answer,
    task_id: task.task_id,
    session_id: task.session_id,
    thread_id: task.thread_id,
    steps: task.steps,
    usage: task.usage,
    toolsets_used: task.toolsets_used,
    ...(task.tokens ? { tokens: task.tokens } : {}),
    ...(task.finished_at ? { duration_ms: Date.parse(task.finished_at) - Date.parse(task.created_at) } : {}),
    ...(task.error ? { error: task.error } : {}),
  };
}

/** The outcome of a task that made no step (ended before it started, or its loop threw at once). */
export function noSteps(status: LoopOutcome['status'], error: string, tokenizer: string): LoopOutcome {
  return {
    status,
    final_answer: null,
    error,
    steps: 0,
    usage: noUsage(),
    toolsets_used: [],
    tokens: noTokens(tokenizer),
  };
}

/** The outcome of a loop that threw instead of ending (a bug): the task fails saying so. */
export function crashed(err: unknown, tokenizer: string): LoopOutcome {
  return noSteps('failed', `Task failed: ${(err as Error).message}`, tokenizer);
}
