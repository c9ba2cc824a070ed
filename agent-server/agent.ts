import { randomUUID } from 'node:crypto';
import type { Logger } from '../lib/log.ts';
import type { ExecuteTaskRequest, ExecuteTaskResponse, TaskEvent } from './contract.ts';
import { ModelNotConfiguredError } from './errors.ts';
import type { GatewayClient } from './gateway-client.ts';
import { runLoop } from './loop.ts';
import type { Model } from './model.ts';
import type { TaskStore } from './store.ts';

/** What the agent needs; `model` is undefined when no endpoint is configured. */
export interface AgentDeps {
  store: TaskStore;
  gateway: GatewayClient;
  model: Model | undefined;
  modelName: string;
  defaultMaxSteps: number;
  log: Logger;
}

/** A task's lifecycle: record it, run the loop, store every event and the outcome. */
export type Agent = ReturnType<typeof createAgent>;

export function createAgent(deps: AgentDeps) {
  return {
    modelConfigured: deps.model !== undefined,

    /** Runs a task to its end; `onEvent` sees each event as it is recorded (for SSE). */
    async execute(
      req: ExecuteTaskRequest,
      onEvent?: (event: TaskEvent) => void,
    ): Promise<ExecuteTaskResponse> {
      const model = deps.model;
      if (!model) throw new ModelNotConfiguredError();
      const taskId = `task_${randomUUID()}`;
      const sessionId = req.session_id ?? `ses_${randomUUID()}`;
      deps.store.createTask(taskId, sessionId, req.goal);
      const emit = (type: TaskEvent['type'], data: Record<string, unknown>, durationMs?: number) => {
        const event = deps.store.appendEvent(taskId, type, durationMs ?? null, data);
        onEvent?.(event);
      };
      const maxSteps = req.max_steps ?? deps.defaultMaxSteps;
      emit('task_started', { task_id: taskId, session_id: sessionId, goal: req.goal, max_steps: maxSteps });
      const started = performance.now();
      const outcome = await runLoop(
        { sessionId, goal: req.goal, maxSteps },
        { model, modelName: deps.modelName, gateway: deps.gateway, emit },
      );
      deps.store.finishTask(taskId, outcome);
      emit('task_finished', { status: outcome.status, error: outcome.error }, performance.now() - started);
      deps.log.info(
        { task: taskId, session: sessionId, status: outcome.status, steps: outcome.steps },
        'task ended',
      );
      return {
        status: outcome.status,
        final_answer: outcome.final_answer,
        task_id: taskId,
        session_id: sessionId,
        steps: outcome.steps,
        usage: outcome.usage,
        toolsets_used: outcome.toolsets_used,
        ...(outcome.error ? { error: outcome.error } : {}),
      };
    },
  };
}
