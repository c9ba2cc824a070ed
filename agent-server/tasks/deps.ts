import type { Quota } from '../../lib/identity/quota.ts';
import type { Logger } from '../../lib/telemetry/log.ts';
import type { TokenCounter } from '../../lib/telemetry/tokens.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import type { Model } from '../clients/model.ts';
import type { ExecuteTaskResponse, ModelDeltaEvent, TaskEvent, ToolExposure } from '../contract.ts';
import type { ScriptLimits } from '../sandbox/limits.ts';
import type { TaskStore } from '../store/store.ts';
import type { WebhookGuard } from '../webhooks/guard.ts';
import type { AgentMetrics } from './metrics.ts';

// What the task runner (agent.ts) is built from, and how a caller hears a task.

/** What the agent needs; `model` is undefined when no endpoint is configured. */
export interface AgentDeps {
  store: TaskStore;
  gateway: GatewayClient;
  model: Model | undefined;
  modelName: string;
  /** The model endpoint (for traces' server.address); the provider's default when absent. */
  modelBaseURL?: string;
  /** The API spoken to the model (AGENT_PROVIDER), for traces' gen_ai.provider.name. */
  modelProvider?: string;
  defaultMaxSteps: number;
  log: Logger;
  /** A task's wall-clock limit when its request sets none (AGENT_MAX_DURATION_S; default 30 min). */
  defaultMaxDurationS?: number;
  /** How long a task waits for a gateway it cannot reach at all before it fails (default 30 s: a restart). */
  gatewayAwayMs?: number;
  /** Counts tool-definition and message tokens (default: o200k_base). */
  tokens?: TokenCounter;
  metrics?: AgentMetrics;
  /** Tasks that may run at once (MAX_CONCURRENT_TASKS); paused ones do not count. Default 4. */
  maxConcurrentTasks?: number;
  /** Tasks that may wait for a slot beyond those (MAX_QUEUED_TASKS; 0: none wait, a busy agent answers 503). Default 1000. */
  maxQueuedTasks?: number;
  /** How often, with free slots, the store is read for queued tasks no one here holds (default 1 s). */
  queuePollMs?: number;
  /** How tasks show tools to the model unless a request says (TOOL_EXPOSURE; default native). */
  exposure?: ToolExposure;
  /** Whether tasks start with the toolset discovery is certain of, unless a request says (AGENT_PRIME_TOOLSETS; default on). */
  prime?: boolean;
  /** How often a paused task asks the gateway whether its approval was decided (default 1 s). */
  approvalPollMs?: number;
  /** How long a task waits for its owner to connect their own account (CONSENT_TIMEOUT_S; default 1 hour). */
  consentTimeoutS?: number;
  /** How often the tasks waiting for a consent ask the gateway whether it was given (default 3 s). */
  consentPollMs?: number;
  /** The model's context budget in tokens (AGENT_CONTEXT_TOKENS; default by model family, loop/context.ts). */
  contextTokens?: number;
  /** The bounds of a run_code script (RUN_CODE_*); the sandbox's defaults when absent. */
  scriptLimits?: ScriptLimits;
  /** AUTO_EXPOSURE_TOKENS: up to these tool-definition tokens an `auto` task loads every toolset. */
  autoExposureTokens?: number;
  /** Where tasks' webhooks may be POSTed; absent, a task that names one is refused (nothing to sign it with). */
  webhooks?: WebhookGuard;
  /** The limits a thread's owner's tasks count against (lib/identity/quota.ts); absent: none. */
  quotaOf?: (owner: string) => Promise<Quota | undefined>;
}

/** Hears a running task's events as they are recorded (and what is not recorded: `live`), then its end. */
export interface TaskListener {
  event(event: TaskEvent): void;
  /** The model's text as it streams (never stored). */
  live?(event: ModelDeltaEvent): void;
  end?(result: ExecuteTaskResponse): void;
}
