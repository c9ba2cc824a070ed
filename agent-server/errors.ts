// The agent-server's typed errors; the base class names each one after itself.

/** Base of the family. */
export class AgentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The model endpoint failed for good (non-retryable 4xx, or retries exhausted); the task fails with it. */
export class ModelError extends AgentError {}

/** No model endpoint is configured, so tasks cannot run; everything else still works. */
export class ModelNotConfiguredError extends AgentError {
  constructor() {
    super(
      'No model is configured: set OPENAI_API_KEY (for OpenAI), ANTHROPIC_API_KEY (for Anthropic) or OPENAI_BASE_URL ' +
        '(for Ollama, vLLM, LM Studio or another OpenAI-compatible server), and optionally AGENT_MODEL, then restart ' +
        'the agent-server.',
    );
  }
}

/** Why a task was stopped from outside its loop: a client cancelled it, or its wall-clock limit passed. */
export type StopReason = 'cancelled' | 'timed_out';

/** Thrown into a task's in-flight work when it is stopped; the loop ends the task with `reason` as its status. */
export class TaskStoppedError extends AgentError {
  readonly reason: StopReason;

  constructor(
    reason: StopReason,
    message = reason === 'cancelled' ? 'The task was cancelled' : 'The task reached its time limit',
  ) {
    super(message);
    this.reason = reason;
  }
}

/** A thread that is no longer there (deleted, or pruned by retention) when a turn of it was to be recorded. */
export class ThreadGone extends AgentError {
  constructor(threadId: string) {
    super(`No thread ${threadId}: it was deleted; GET /agent/threads lists yours`);
  }
}

/** A thread that holds as many turns as a thread may: the conversation goes on in a new thread. */
export class ThreadFull extends AgentError {
  constructor(threadId: string, max: number) {
    super(
      `Thread ${threadId} holds ${max} turns, the most a thread keeps; start a new thread (leave thread_id out)`,
    );
  }
}
