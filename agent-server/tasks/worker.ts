import type { TokenCounter } from '../../lib/telemetry/tokens.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import type { EventType, ExecuteTaskResponse, ModelDeltaEvent, ToolExposure, Webhook } from '../contract.ts';
import type { ApprovalWaiter } from './approval-wait.ts';
import type { ConsentWatch } from './consent-wait.ts';
import type { AgentDeps, TaskListener } from './deps.ts';
import type { TaskTrace } from './trace.ts';

// What this process's tasks share (the worker), and what one task's run here carries through its parts: its
// launch and loop (run.ts), its pauses for a human (pause.ts) and its end (end.ts).

/** A task running (or paused) here. */
export interface RunningTask {
  controller: AbortController;
  listeners: Set<TaskListener>;
  done: Promise<ExecuteTaskResponse>;
  /** The text the model has streamed so far in the reply being written: a follower who joins now gets it. */
  streamed?: { event?: ModelDeltaEvent };
}

/** What a task needs to start, kept with it while it waits in the queue (and across a restart). */
export interface QueuedRequest {
  maxSteps: number;
  maxDurationS: number;
  exposure: ToolExposure;
  /** Activate the toolset discovery is certain of before the first model call (absent: no). */
  prime?: boolean;
  /** Where its end and its waits for a human are POSTed, its own or its thread's (webhooks/, README "Webhooks"). */
  webhook?: Webhook;
}

/** A task as a worker runs it: its request, and when it was submitted (its time limit counts from then). */
export type TaskToRun = {
  taskId: string;
  sessionId: string;
  /** The thread the task is a turn of (null: recorded before threads). */
  threadId: string | null;
  goal: string;
  createdAt: string;
} & QueuedRequest;

/** This process's tasks, shared by the queue and the runs. */
export interface Worker {
  deps: AgentDeps;
  tokens: TokenCounter;
  /** Tasks running or paused here, by id. */
  running: Map<string, RunningTask>;
  /** Those of them paused: waiting for an approval or a consent (they take no slot). */
  paused: Set<string>;
  /**
   * Tasks running here that go on in another worker (it resumed the paused task first, or this worker lost the
   * lease): whatever else stopped them, this worker writes nothing more of them.
   */
  movedOn: Set<string>;
  waiter: ApprovalWaiter;
  /** The waits of its tasks for their owners to connect their own accounts (one loop for them all). */
  consents: ConsentWatch;
  /** Starts queued tasks while slots are free. */
  drain(): void;
  /** Follows a task that goes on in another process until its end. */
  ranElsewhere(taskId: string, listeners: Set<TaskListener>): Promise<ExecuteTaskResponse>;
}

/** One task's run in this process, as its launch, its pauses and its end share it. */
export interface TaskRun {
  readonly w: Worker;
  readonly task: Omit<TaskToRun, 'exposure'> & { exposure?: ToolExposure };
  readonly taskId: string;
  /** Aborted with the reason the task stops: a cancel, its time limit, shutdown, or going on elsewhere. */
  readonly controller: AbortController;
  /** The task's gateway, riding out a blip of the gateway's database. */
  readonly gateway: GatewayClient;
  readonly listeners: Set<TaskListener>;
  /** Its spans, when tracing is on. */
  readonly traced: TaskTrace | undefined;
  /** Records an event: traced, stored, observed and told to the listeners. */
  readonly emit: (type: EventType, data: Record<string, unknown>, durationMs?: number) => void;
  /** The text the model has streamed so far in the reply being written (for a follower who joins now). */
  readonly streamed: { event?: ModelDeltaEvent };
}
