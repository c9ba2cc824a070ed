import type {
  EventType,
  FinalStatus,
  Task,
  TaskEvent,
  TaskStatus,
  TokenTotals,
  Usage,
  WebhookDelivery,
  WebhookKind,
} from '../contract.ts';
import type { StoredThread, TaskThread, ThreadContext, ThreadTurnRow } from './thread-types.ts';

export type { StoredThread, TaskThread, ThreadContext, ThreadTurnRow };

/**
 * How a task ended, as stored (what its loop ends with: the loop's outcome is this shape, and the store, below
 * the loop, names it from the contract's types alone).
 */
export interface TaskOutcome {
  status: FinalStatus;
  final_answer: string | null;
  error: string | null;
  steps: number;
  usage: Usage;
  toolsets_used: string[];
  tokens: TokenTotals;
  /** What the task added to its thread's conversation (recorded with its end). */
  transcript?: unknown;
}

/** A webhook POST to record with what it tells (a task's end, its pause): sent from the store once committed. */
export interface WebhookToSend {
  /** The `webhook-id`. */
  id: string;
  kind: WebhookKind;
  /** What happened, unique per task (`finished`, `waiting:<call id>`): recorded twice, it is sent once. */
  key: string;
  url: string;
  /** The JSON body. */
  payload: string;
}

/** A webhook POST claimed to be sent now (`attempts` counts this one). */
export interface DueWebhook {
  id: string;
  task_id: string;
  kind: WebhookKind;
  url: string;
  payload: string;
  attempts: number;
  created_at: string;
}

/** One tool call of the reply a task's checkpoint holds, as recorded around its run. */
export interface CallRecord {
  /** The call's position in the reply. */
  index: number;
  call_id: string;
  /** Recorded when the call ended; until then its outcome is unknown (it may have run, or not). */
  finished: boolean;
  /** The tool message the call answered with, and the loop state after it (toolsets used, tools shown). */
  result: unknown;
}

/** The messages a checkpoint adds to its task's conversation: those from position `start` on. */
export interface CheckpointPart {
  start: number;
  messages: unknown[];
}

/** A task claimed from the queue: where it goes on from (null: from its start), and its calls since then. */
export interface Claim {
  /** It ran before (on another worker, or before a restart): it goes on rather than starts. */
  resumed: boolean;
  state: unknown;
  /** Why its checkpoint could not be read (its stored parts do not tile it): it ends failed, saying so. */
  unreadable?: string;
  calls: CallRecord[];
  /** What it needs to start (steps, duration, exposure), as submitted. */
  request: unknown;
}

/** A task claimed by claimNext: its row, and what it goes on from. */
export interface ClaimedTask {
  task: Task;
  claim: Claim;
}

/**
 * What another process changed in the queue, as heard: tasks queued (or requeued: free slots may claim them),
 * tasks it claimed (by id; `*` when there were more than a notification holds), or anything else (a decision
 * made: paused tasks look, and the queue is read).
 */
export type QueueChange = { kind: 'queued' } | { kind: 'claimed'; taskIds: string[] | '*' } | { kind: 'any' };

/** Who holds tasks through a store, and for how long a claim lasts without a heartbeat. */
export interface LeaseOptions {
  /** This worker, as its leases name it (host, process, a random part). */
  holder?: string;
  /** How long a lease lasts; heartbeats renew it at a third of that. */
  leaseMs?: number;
  /**
   * The clock leases are taken, renewed and judged lapsed by, in milliseconds since the epoch (Date.now unless
   * a test moves time itself). Every worker sharing a database compares its leases on its own clock: their
   * clocks must agree to well within a lease (NTP does).
   */
  now?: () => number;
}

export interface StoreOptions extends LeaseOptions {
  /** A batched write that failed (the events of a task are then missing from the log). */
  onWriteError?: (err: unknown) => void;
  /**
   * Aborted when the process stops: a running task's write that waits for an unreachable database (PostgreSQL)
   * then fails instead of waiting on (the task stays in the database as it was, and its lease lapses).
   */
  stopping?: AbortSignal;
}

/** A write refused because this worker no longer holds the task's lease (it lapsed; another may run it). */
export class LeaseLost extends Error {
  readonly taskId: string;
  constructor(taskId: string) {
    super(`this worker no longer holds the lease of task ${taskId}`);
    this.name = new.target.name;
    this.taskId = taskId;
  }
}

/**
 * The agent-server's persistence, one implementation (store.ts) on SQLite (the embedded default) or PostgreSQL
 * (when DATABASE_URL names one); tests/agent-server/store/contract.test.ts runs the same suite on both.
 *
 * Tasks form a durable queue. A worker runs a task only while it holds its lease: taken when it creates or
 * claims the task, renewed by a heartbeat, numbered by a fence that goes up with each claim. Every write of a
 * running task (its events, checkpoints, call records, pause and end) carries the fence and is refused once
 * the lease lapsed or another worker claimed the task: `onLeaseLost` hears of it. A lapsed lease is requeued
 * (`requeueLapsed`) and the next claim goes on from the task's checkpoint. Writes of a task's creation,
 * claim, checkpoint, calls, pause and end are durable when they resolve; events are numbered at once and
 * written behind, in batches, and every read sees them.
 */
export interface TaskStore {
  /** This store's worker name (in its leases). */
  readonly holder: string;
  /** An embedded store: one process uses it, so at start every running task is one a stopped process left. */
  readonly embedded: boolean;
  /** The fence this worker holds `taskId` under (undefined: none); its tool calls carry it to the gateway. */
  fenceOf(taskId: string): number | undefined;
  /**
   * Records a new task (durable when it resolves) with what it needs to start (`request`): running, under
   * this worker's lease, or with `queued` waiting for a worker to claim it. A turn of a thread whose last turn
   * has not ended is recorded queued all the same (it says so); a thread gone or full throws ThreadGone or
   * ThreadFull.
   */
  createTask(
    taskId: string,
    sessionId: string,
    goal: string,
    opts?: { queued?: boolean; request?: unknown; thread?: TaskThread },
  ): Promise<'running' | 'queued'>;
  /** Records a thread with no task yet. */
  createThread(thread: Omit<StoredThread, 'updated_at'>): Promise<void>;
  getThread(threadId: string): Promise<StoredThread | undefined>;
  /** Who owns the threads that act in gateway session `sessionId` (a few at most). */
  sessionOwners(sessionId: string): Promise<string[]>;
  /** Threads, newest first: `owner`'s (null: everyone's), after thread `after`. */
  listThreads(owner: string | null, limit: number, after?: string): Promise<StoredThread[]>;
  /** A thread's last `limit` tasks in order, and how many it has. */
  threadTurns(threadId: string, limit: number): Promise<{ turns: ThreadTurnRow[]; total: number }>;
  /** The transcripts of a thread's ended tasks, in order: its conversation. */
  threadTranscripts(threadId: string): Promise<{ task_id: string; transcript: unknown }[]>;
  /** The thread's first task that has not ended (queued, running or waiting), if any. */
  activeTurn(threadId: string): Promise<{ task_id: string; status: TaskStatus } | undefined>;
  /** The transcript of the thread's last ended task (it says how the compaction stands), or null. */
  lastTranscript(threadId: string): Promise<unknown>;
  /** Deletes a thread and its tasks: undefined when there is none, `busy` when a task of it has not ended. */
  deleteThread(threadId: string): Promise<{ deleted: number } | { busy: string } | undefined>;
  /** Deletes up to `limit` threads idle since `before` (none with a task not ended), with their tasks. */
  pruneThreads(before: string, limit: number): Promise<number>;
  /**
   * Claims a queued task under this worker's lease: what it goes on from. Undefined when it is no longer
   * queued (claimed by another worker, ended).
   */
  claim(taskId: string): Promise<Claim | undefined>;
  /**
   * Claims up to `limit` queued tasks, oldest first, under this worker's lease, in one statement that hands back
   * each task's row and what it goes on from (on a shared database, tasks other workers are claiming at the same
   * moment are skipped, not waited for). Every other process hears the ids claimed (onQueueChange). `skip`:
   * tasks not to take (a run of them still ends here, after its lease lapsed and another process requeued it).
   */
  claimNext(limit: number, skip?: readonly string[]): Promise<ClaimedTask[]>;
  /** Tasks waiting for a worker, oldest first, with what they need to start. */
  queued(): Promise<{ task: Task; request: unknown }[]>;
  /**
   * Records an event of a task this worker holds (or one it holds no lease of: unfenced), numbered after its
   * last one; returns it as readers will see it. The write itself is batched (a failure goes to onWriteError,
   * a refusal to onLeaseLost).
   */
  appendEvent(
    taskId: string,
    type: EventType,
    durationMs: number | null,
    data: Record<string, unknown>,
  ): TaskEvent;
  /**
   * Records where the task goes on from if its worker stops: a reply whose tool calls are about to run. The
   * call records of the reply before it are dropped. Written behind, in the task's order: it is durable once
   * the reply's first call is recorded as started (a refusal goes to onLeaseLost). `steps` is the steps taken
   * so far, shown while the task runs or waits. With `part`, `state` holds no `messages`: the checkpoint's
   * conversation is the parts written before it up to `part.start`, then `part.messages` (start 0: a new base,
   * the parts before it go); an append whose start is not where the parts end is refused like a lost lease.
   * A claim hands back the state with its `messages` put together again.
   */
  checkpoint(taskId: string, state: unknown, steps: number, part?: CheckpointPart): Promise<void>;
  /**
   * Records that call `index` of the checkpoint's reply starts now, with every write of the task before it
   * (the checkpoint, the last call's end): durable when it resolves, before the call runs. Throws LeaseLost.
   */
  callStarted(taskId: string, index: number, callId: string): Promise<void>;
  /**
   * Records how call `index` ended; written behind, in the task's order (lost in a crash, the call looks
   * unfinished: the safe side). A refusal goes to onLeaseLost.
   */
  callFinished(taskId: string, index: number, callId: string, result: unknown): Promise<void>;
  /**
   * Records that the task waits for `pending`, with the loop state to resume from and the steps taken so far;
   * the lease is let go. `webhook`: a POST recorded with it; `status`: what it waits for (a human's decision
   * when absent).
   */
  pause(
    taskId: string,
    pending: unknown,
    state: unknown,
    steps: number,
    webhook?: WebhookToSend,
    status?: 'awaiting_approval' | 'awaiting_consent',
  ): Promise<void>;
  /**
   * The task goes on after its pause, under this worker's lease: true for the one caller that moves it from
   * awaiting to running (of several workers resuming it, one goes on).
   */
  unpause(taskId: string): Promise<boolean>;
  /** Records a human's decision on a paused task's call (one the agent-server itself asks about); false when it is not paused for `callId`. */
  decide(taskId: string, callId: string, decision: unknown): Promise<boolean>;
  /** Tasks paused (for an approval or a consent), with what they wait for, their saved loop state, and any decision recorded. */
  awaiting(): Promise<
    { task: Task; pending: unknown; state: unknown; decision: unknown; request: unknown }[]
  >;
  /** The call records of the task's checkpointed reply. */
  calls(taskId: string): Promise<CallRecord[]>;
  /**
   * Records how the task ended (throws LeaseLost when another worker holds it now); `webhook`: a POST recorded
   * with it.
   */
  finishTask(taskId: string, outcome: TaskOutcome, webhook?: WebhookToSend): Promise<void>;
  /**
   * Claims up to `limit` webhook POSTs that are due, each for `leaseMs` (one worker sends each; when its claim
   * lapses unanswered, another may send it again); the attempt is counted.
   */
  claimWebhooks(limit: number, leaseMs: number): Promise<DueWebhook[]>;
  /** Records that a receiver took the POST (a 2xx). */
  webhookDelivered(id: string): Promise<void>;
  /** Records a failed attempt: retried at `nextAt` (ms since the epoch), or, with none, given up as `failed`. */
  webhookRetry(id: string, error: string, nextAt?: number): Promise<void>;
  /** The webhook POSTs of a task, oldest first. */
  webhookDeliveries(taskId: string): Promise<WebhookDelivery[]>;
  /** Hears when this process recorded a webhook POST (the deliverer looks at once); returns the stop. */
  onWebhookDue(listener: () => void): () => void;
  /** Gives a running task back to the queue (this worker stops): another worker, or the next start, claims it. */
  release(taskId: string): Promise<void>;
  getTask(taskId: string): Promise<Task | undefined>;
  /** The task's events after `after` (a seq), in order. */
  events(taskId: string, after?: number): Promise<TaskEvent[]>;
  /** The newest tasks first; with a filter, those in a status, whose goal holds some text, older than a task. */
  recentTasks(limit: number, filter?: TaskFilter): Promise<Task[]>;
  /** How many tasks are in each status (statuses with none are absent); of `owner`'s threads when given. */
  countTasks(owner?: string): Promise<Partial<Record<TaskStatus, number>>>;
  /** Stores a console login or a one-time login code (agent-server/console/sessions.ts). */
  saveLogin(login: StoredLogin): Promise<void>;
  /** The unexpired console session whose secret hashes to `idHash`. */
  login(idHash: string): Promise<StoredLogin | undefined>;
  /** Removes a login code and returns it when it was unexpired: once, across every process. */
  takeLoginCode(idHash: string): Promise<StoredLogin | undefined>;
  /** Ends a console session (logging out). */
  dropLogin(idHash: string): Promise<void>;
  /** Deletes up to `limit` expired logins and codes; returns how many. */
  pruneLogins(limit: number): Promise<number>;
  /**
   * Requeues running tasks whose lease lapsed (with `all`, every running task: an embedded store's previous
   * process is gone); returns their ids.
   */
  requeueLapsed(all?: boolean): Promise<string[]>;
  /** Hears of each task whose lease this worker lost. */
  onLeaseLost(listener: (taskId: string) => void): void;
  /**
   * Hears when another process sharing the store changed the queue (a task queued, requeued or claimed, a
   * decision made). Coalesced and best-effort (a process polls as well); an embedded store has no other
   * process and never calls it. Returns the function that stops listening.
   */
  onQueueChange(listener: (change: QueueChange) => void): () => void;
  /** Hears when another process wrote events of task `taskId` (as onQueueChange: best-effort, coalesced). */
  onTaskEvents(taskId: string, listener: () => void): () => void;
  /** Hears when another process recorded the end of task `taskId` (best-effort). */
  onTaskEnd(taskId: string, listener: () => void): () => void;
  /** Tells every process sharing the store to look at its queue and paused tasks now. */
  wake(): Promise<void>;
  /** Deletes up to `limit` finished tasks (with their events) older than `before`; returns how many. */
  pruneTasks(before: string, limit: number): Promise<number>;
  /** Commits the batched writes now. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** Which tasks a listing shows (every part optional). */
export interface TaskFilter {
  status?: TaskStatus;
  /** Text the goal contains (case-insensitive for ASCII letters). */
  goal?: string;
  /** Only tasks listed after this one (the previous page's last task: keyset paging). */
  after?: string;
  /** Only tasks of no thread and of this owner's threads. */
  owner?: string;
}

/**
 * A console login (`session`) or a one-time login code (`code`), as stored: the hash of its secret, the role it
 * grants, and the token it was made with, sealed with a key only the secret gives (the database alone holds
 * no token).
 */
export interface StoredLogin {
  id_hash: string;
  kind: 'session' | 'code';
  role: string;
  sealed: string;
  /** Milliseconds since the epoch. */
  expires_at: number;
}

/** `LIKE` text that matches `text` literally (escaping with `\`). */
export function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A task's row as the store reads it: JSON columns as text. */
export interface TaskRow {
  request?: string | null;
  pending_approval?: string | null;
  resume_state?: string | null;
  decision?: string | null;
  lease_owner?: string | null;
  lease_until?: unknown;
  fence?: number | string;
  task_id: string;
  session_id: string;
  thread_id: string | null;
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
export function toTask({
  pending_approval: _p,
  resume_state: _r,
  request: _q,
  decision: _d,
  lease_owner: _o,
  lease_until: _u,
  fence: _f,
  ...row
}: TaskRow): Task {
  return {
    ...row,
    usage: JSON.parse(row.usage),
    toolsets_used: JSON.parse(row.toolsets_used),
    tokens: row.tokens ? JSON.parse(row.tokens) : null,
  };
}
