import { randomUUID } from 'node:crypto';
import type { Logger } from '../lib/log.ts';
import { currentRequestId } from '../lib/request-id.ts';
import { createTokenCounter, type TokenCounter } from '../lib/tokens.ts';
import type { EventType, ExecuteTaskRequest, ExecuteTaskResponse, Task, TaskEvent } from './contract.ts';
import { ModelNotConfiguredError, TaskStoppedError } from './errors.ts';
import type { GatewayClient } from './gateway-client.ts';
import { type LoopOutcome, runLoop } from './loop.ts';
import type { AgentMetrics } from './metrics.ts';
import type { Model } from './model.ts';
import type { TaskStore } from './store.ts';
import { observeEvent } from './task-observer.ts';

/** What the agent needs; `model` is undefined when no endpoint is configured. */
export interface AgentDeps {
  store: TaskStore;
  gateway: GatewayClient;
  model: Model | undefined;
  modelName: string;
  defaultMaxSteps: number;
  log: Logger;
  /** A task's wall-clock limit when its request sets none (AGENT_MAX_DURATION_S; default 30 min). */
  defaultMaxDurationS?: number;
  /** Counts tool-definition and message tokens (default: o200k_base). */
  tokens?: TokenCounter;
  metrics?: AgentMetrics;
}

/** Hears a running task's events as they are recorded, then its end. */
export interface TaskListener {
  event(event: TaskEvent): void;
  end?(result: ExecuteTaskResponse): void;
}

interface RunningTask {
  controller: AbortController;
  listeners: Set<TaskListener>;
  done: Promise<ExecuteTaskResponse>;
}

/** A task's answer as stored: what the blocking call returns and what an event stream ends with. */
export function resultOf(task: Task): ExecuteTaskResponse {
  return {
    status: task.status === 'running' ? 'failed' : task.status,
    final_answer: task.final_answer,
    task_id: task.task_id,
    session_id: task.session_id,
    steps: task.steps,
    usage: task.usage,
    toolsets_used: task.toolsets_used,
    ...(task.tokens ? { tokens: task.tokens } : {}),
    ...(task.finished_at ? { duration_ms: Date.parse(task.finished_at) - Date.parse(task.created_at) } : {}),
    ...(task.error ? { error: task.error } : {}),
  };
}

/** The outcome of a loop that threw instead of ending (a bug): the task fails saying so. */
function crashed(err: unknown, tokenizer: string): LoopOutcome {
  return {
    status: 'failed',
    final_answer: null,
    error: `Task failed: ${(err as Error).message}`,
    steps: 0,
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    toolsets_used: [],
    tokens: {
      tokenizer,
      requests: 0,
      tool_definition_tokens: 0,
      all_toolsets_tool_tokens: 0,
      message_tokens: 0,
    },
  };
}

/** A task's lifecycle: record it, run the loop apart from any request, store and publish every event. */
export type Agent = ReturnType<typeof createAgent>;

export function createAgent(deps: AgentDeps) {
  const running = new Map<string, RunningTask>();
  const tokens = deps.tokens ?? createTokenCounter();
  const defaultMaxDurationS = deps.defaultMaxDurationS ?? 1800;

  /** Starts a task and returns at once; the task runs until it ends, whoever is or is not listening. */
  function start(req: ExecuteTaskRequest, listener?: TaskListener) {
    const model = deps.model;
    if (!model) throw new ModelNotConfiguredError();
    const taskId = `task_${randomUUID()}`;
    const sessionId = req.session_id ?? `ses_${randomUUID()}`;
    const maxSteps = req.max_steps ?? deps.defaultMaxSteps;
    const maxDurationS = req.max_duration_s ?? defaultMaxDurationS;
    deps.store.createTask(taskId, sessionId, req.goal);
    const controller = new AbortController();
    const listeners = new Set<TaskListener>(listener ? [listener] : []);
    const emit = (type: EventType, data: Record<string, unknown>, durationMs?: number) => {
      const event = deps.store.appendEvent(taskId, type, durationMs ?? null, data);
      observeEvent(event, taskId, deps);
      for (const l of listeners) l.event(event);
    };
    const timer = setTimeout(() => {
      const why = `The task reached its time limit (max_duration_s = ${maxDurationS})`;
      controller.abort(new TaskStoppedError('timed_out', why));
    }, maxDurationS * 1000);
    emit('task_started', {
      task_id: taskId,
      session_id: sessionId,
      goal: req.goal,
      max_steps: maxSteps,
      max_duration_s: maxDurationS,
      model: deps.modelName,
      request_id: currentRequestId() ?? null,
    });
    const started = performance.now();
    const done = (async (): Promise<ExecuteTaskResponse> => {
      const outcome = await runLoop(
        { sessionId, goal: req.goal, maxSteps },
        { model, modelName: deps.modelName, gateway: deps.gateway, emit, tokens, signal: controller.signal },
      ).catch((err: unknown) => crashed(err, tokens.name));
      clearTimeout(timer);
      const durationMs = Math.round(performance.now() - started);
      deps.store.finishTask(taskId, outcome);
      emit(
        'task_finished',
        {
          status: outcome.status,
          error: outcome.error,
          steps: outcome.steps,
          usage: outcome.usage,
          tokens: outcome.tokens,
          toolsets_used: outcome.toolsets_used,
        },
        durationMs,
      );
      const result: ExecuteTaskResponse = {
        status: outcome.status,
        final_answer: outcome.final_answer,
        task_id: taskId,
        session_id: sessionId,
        steps: outcome.steps,
        usage: outcome.usage,
        toolsets_used: outcome.toolsets_used,
        tokens: outcome.tokens,
        duration_ms: durationMs,
        ...(outcome.error ? { error: outcome.error } : {}),
      };
      running.delete(taskId);
      for (const l of listeners) l.end?.(result);
      listeners.clear();
      return result;
    })();
    running.set(taskId, { controller, listeners, done });
    return { task_id: taskId, session_id: sessionId, done };
  }

  return {
    modelConfigured: deps.model !== undefined,
    start,

    /** Runs a task to its end; `onEvent` sees each event as it is recorded. */
    async execute(
      req: ExecuteTaskRequest,
      onEvent?: (event: TaskEvent) => void,
    ): Promise<ExecuteTaskResponse> {
      return start(req, onEvent ? { event: onEvent } : undefined).done;
    },

    /**
     * Subscribes to a running task's live events; returns the unsubscribe function, or undefined when the
     * task is not running here (it has ended: its stored events are all there is).
     */
    follow(taskId: string, listener: TaskListener): (() => void) | undefined {
      const task = running.get(taskId);
      if (!task) return undefined;
      task.listeners.add(listener);
      return () => task.listeners.delete(listener);
    },

    /**
     * Stops a running task: in-flight model and tool calls are abandoned and no further call starts. Resolves
     * true once it has ended (or after `waitMs`), false when the task is not running here.
     */
    async cancel(taskId: string, waitMs = 10_000): Promise<boolean> {
      const task = running.get(taskId);
      if (!task) return false;
      task.controller.abort(new TaskStoppedError('cancelled', 'The task was cancelled by a client'));
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, waitMs);
      });
      await Promise.race([task.done, late]);
      clearTimeout(timer);
      return true;
    },
  };
}
