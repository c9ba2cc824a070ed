import { createTokenCounter } from '../../lib/telemetry/tokens.ts';
import type { PendingApproval, PendingConsent, Task } from '../contract.ts';
import type { LoopSnapshot } from '../loop/loop.ts';
import type { TaskStore } from '../store/interface.ts';
import { createApprovalWaiter } from './approval-wait.ts';
import { createConsentWatch } from './consent-wait.ts';
import type { AgentDeps } from './deps.ts';
import { followElsewhere } from './follow.ts';
import { ResumedElsewhere } from './outcome.ts';
import { createTaskQueue } from './queue.ts';
import { type LaunchOptions, launchTask, type QueuedRequest, type TaskToRun, type Worker } from './run.ts';

// One agent-server's tasks, as the API's verbs share them (agent.ts, start.ts, decisions.ts): the worker (what
// runs or waits here), the queue of tasks waiting for a slot, the slots and limits, and how a task is launched.

/** The agent-server's tasks and their limits. */
export interface AgentCore {
  deps: AgentDeps;
  worker: Worker;
  queue: ReturnType<typeof createTaskQueue>;
  /** Tasks being claimed or recorded right now (each will take a slot, or a place in the queue). */
  slots: { claiming: number; enqueuing: number };
  /** Tasks taking a slot now. */
  active(): number;
  limits: { maxConcurrent: number; maxQueued: number; defaultMaxDurationS: number };
  launch(task: Parameters<typeof launchTask>[1], opts?: LaunchOptions): ReturnType<typeof launchTask>;
}

export function createAgentCore(deps: AgentDeps): AgentCore {
  const running: Worker['running'] = new Map();
  const paused = new Set<string>();
  const movedOn = new Set<string>();
  const queuePollMs = deps.queuePollMs ?? 1000;
  const slots = { claiming: 0, enqueuing: 0 };
  const active = () => running.size - paused.size + slots.claiming;
  const limits = {
    maxConcurrent: deps.maxConcurrentTasks ?? 4,
    maxQueued: deps.maxQueuedTasks ?? 1000,
    defaultMaxDurationS: deps.defaultMaxDurationS ?? 1800,
  };

  // A task whose lease this worker lost (it lapsed; another worker may have claimed it) stops here at once:
  // its writes are refused from now on, and it goes on wherever it is claimed next.
  deps.store.onLeaseLost((taskId) => {
    const task = running.get(taskId);
    if (!task) return;
    movedOn.add(taskId);
    deps.log.warn({ task: taskId }, 'lost the lease of a running task; it goes on where it is claimed next');
    task.controller.abort(new ResumedElsewhere('this worker lost its lease (it lapsed)'));
  });

  const worker: Worker = {
    deps,
    tokens: deps.tokens ?? createTokenCounter(),
    running,
    paused,
    movedOn,
    waiter: createApprovalWaiter(deps.approvalPollMs ?? 1000),
    consents: createConsentWatch({
      connected: async (toolset, owner) => (await deps.gateway.connectionFor(toolset, owner)).connected,
      pollMs: deps.consentPollMs ?? 3000,
      log: deps.log,
    }),
    drain: () => queue.drain(),
    ranElsewhere: (taskId, listeners) => followElsewhere(deps.store, queuePollMs, taskId, listeners),
  };
  const launch: AgentCore['launch'] = (task, opts) => launchTask(worker, task, opts);
  const base = { deps, worker, slots, active, limits, launch };
  const queue = createTaskQueue(worker, {
    slots,
    active,
    maxConcurrent: limits.maxConcurrent,
    pollMs: queuePollMs,
    launch,
    toRun: (task, request) => toRun(base, task, request),
    resumePaused: (p) => resumePaused(base, p),
  });
  return { ...base, queue };
}

/**
 * Waits here for the decision (or the consent) a task stored as paused waits for (its worker stopped, or paused
 * it and moved on): the first worker to see it claims the task (unpause) and goes on from the paused state. An
 * agent-server that runs no tasks (AGENT_ROLE=api) leaves it to the workers.
 */
export function resumePaused(
  a: Omit<AgentCore, 'queue'>,
  paused: Awaited<ReturnType<TaskStore['awaiting']>>[number],
): void {
  const taskId = paused.task.task_id;
  if (!paused.pending || !paused.state || a.worker.running.has(taskId) || !a.deps.model) return;
  if (a.limits.maxConcurrent === 0) return;
  a.launch(toRun(a, paused.task, paused.request), {
    resume: {
      pending: paused.pending as PendingApproval | PendingConsent,
      snapshot: paused.state as LoopSnapshot,
    },
  });
}

/** A stored task as a worker runs it (defaults for what a task recorded before requests were kept lacks). */
export function toRun(a: Omit<AgentCore, 'queue'>, task: Task, request: unknown): TaskToRun {
  const r = (request ?? {}) as Partial<QueuedRequest>;
  return {
    taskId: task.task_id,
    sessionId: task.session_id,
    threadId: task.thread_id,
    goal: task.goal,
    createdAt: task.created_at,
    maxSteps: r.maxSteps ?? a.deps.defaultMaxSteps,
    maxDurationS: r.maxDurationS ?? a.limits.defaultMaxDurationS,
    exposure: r.exposure ?? a.deps.exposure ?? 'native',
    prime: r.prime ?? a.deps.prime ?? true,
    ...(r.webhook ? { webhook: r.webhook } : {}),
  };
}
