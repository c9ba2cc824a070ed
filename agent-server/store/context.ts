import type { ExpressionBuilder } from 'kysely';
import type { DialectHooks, Kdb } from './dialect.ts';
import type { StoreOptions } from './interface.ts';
import type { Leases } from './leases.ts';
import type { AgentDatabase } from './schema.ts';
import type { WebhookParts } from './webhooks.ts';
import type { Writes } from './writes.ts';

// What the store's parts (tasks, events, calls, approvals, logins, claims, notifications) share: the database,
// its dialect's hooks, this worker's leases, the write queue, and the numbering of each task's events.

export interface StoreContext {
  db: Kdb;
  hooks: DialectHooks;
  leases: Leases;
  writes: Writes;
  opts: StoreOptions;
  onWriteError: (err: unknown) => void;
  /** The last seq given to each task this store appends to. */
  lastSeq: Map<string, number>;
  /** Tells the other processes the queue changed (`payload`: what, claims.ts; empty: anything). */
  notifyQueue(payload?: string): Promise<void>;
  /** Webhook POSTs written with a task's end or pause. */
  webhooks: WebhookParts;
  /** `promise`, or StoreUnavailable at once while the database is unreachable (a read does not wait for it). */
  guard<T>(promise: Promise<T>): Promise<T>;
}

/** The statuses of a task not ended yet. */
/** What a paused task waits for: a human's decision, or its owner connecting their own account. */
export const WAITING = ['awaiting_approval', 'awaiting_consent'] as const;
export const ACTIVE = ['queued', 'running', ...WAITING] as const;

/** A task's columns as the contract's Task and the store read them (not its insertion number). */
export const TASK_COLUMNS = [
  'task_id',
  'session_id',
  'thread_id',
  'goal',
  'status',
  'final_answer',
  'error',
  'steps',
  'usage',
  'toolsets_used',
  'tokens',
  'created_at',
  'finished_at',
  'pending_approval',
  'resume_state',
  'request',
  'decision',
  'fence',
] as const;

/**
 * A fenced write's condition on `tasks`: task `taskId` held under `fence` and its lease not lapsed at `now`; an
 * unfenced write (no lease held here: null) only while the task has not ended.
 */
export function held(taskId: string, fence: number | null, now: number) {
  return (eb: ExpressionBuilder<AgentDatabase, 'tasks'>) =>
    eb.and([
      eb('task_id', '=', taskId),
      fence === null
        ? eb('status', 'in', ACTIVE)
        : eb.and([eb('fence', '=', fence), eb('lease_until', '>', now)]),
    ]);
}

/** JSON text as stored, or null. */
export const parsed = (text: string | null | undefined): unknown => (text ? JSON.parse(text) : null);
