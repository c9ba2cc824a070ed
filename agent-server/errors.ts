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
      'No model is configured: set OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL (for Ollama, vLLM, LM Studio or ' +
        'another OpenAI-compatible server), and optionally AGENT_MODEL, then restart the agent-server.',
    );
  }
}
