import { Counter, Gauge, Histogram } from 'prom-client';
import type { Metrics } from '../../lib/telemetry/metrics.ts';

// The agent-server's own series, on the service's registry (lib/telemetry/metrics.ts adds HTTP and tool calls).

const SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300];
const TOKENS = [0, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000];
const STEPS = [1, 2, 3, 5, 8, 13, 20, 30, 50, 100];

/** The agent's series; one set per registry. */
export type AgentMetrics = ReturnType<typeof createAgentMetrics>;

/** Registers the agent's series on `m.registry`. */
export function createAgentMetrics(m: Metrics) {
  const registers = [m.registry];
  return {
    base: m,
    tasks: new Counter({
      name: 'toolshift_tasks_total',
      help: 'Tasks ended, by status (completed, failed, max_steps, cancelled, timed_out)',
      labelNames: ['status'],
      registers,
    }),
    running: new Gauge({ name: 'toolshift_tasks_running', help: 'Tasks running now', registers }),
    steps: new Histogram({
      name: 'toolshift_task_steps',
      help: 'Model calls a task took, observed when it ends',
      buckets: STEPS,
      registers,
    }),
    modelLatency: new Histogram({
      name: 'toolshift_model_call_duration_seconds',
      help: 'Latency of answered model calls, retries included',
      buckets: SECONDS,
      registers,
    }),
    modelRetries: new Counter({
      name: 'toolshift_model_retries_total',
      help: 'Model calls retried, by the status that caused it (network: no answer)',
      labelNames: ['status'],
      registers,
    }),
    providerTokens: new Counter({
      name: 'toolshift_model_tokens_total',
      help: 'Tokens the model provider reported, by kind (prompt, completion)',
      labelNames: ['kind'],
      registers,
    }),
    toolDefinitionTokens: new Histogram({
      name: 'toolshift_tool_definition_tokens',
      help: 'Tool-definition tokens per model request (counted with TOKENIZER)',
      buckets: TOKENS,
      registers,
    }),
    messageTokens: new Histogram({
      name: 'toolshift_message_tokens',
      help: 'Message tokens per model request (counted with TOKENIZER)',
      buckets: TOKENS,
      registers,
    }),
    toolsetActivations: new Counter({
      name: 'toolshift_toolset_activations_total',
      help: 'Toolsets activated by tasks (through manage_toolsets), by toolset',
      labelNames: ['toolset'],
      registers,
    }),
  };
}
