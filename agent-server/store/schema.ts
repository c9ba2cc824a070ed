import type { ColumnType } from 'kysely';
import type { EventType, TaskStatus, WebhookDelivery, WebhookKind } from '../contract.ts';

// The agent-server's tables, one typed schema for both databases (SQLite's agent.db and PostgreSQL): what
// migrations.ts creates, and what every statement of the store reads and writes. JSON is kept as text, booleans
// as integers (0/1), leases and login expiries as milliseconds since the epoch (BIGINT). PostgreSQL answers its
// BIGINT columns as text: those are typed `Int8` here, and the store reads them with Number().

/** A BIGINT column: written as a number, read back as a number (SQLite) or its decimal text (PostgreSQL). */
export type Int8 = ColumnType<number | string, number, number>;
type NullableInt8 = ColumnType<number | string | null, number | null, number | null>;

export interface TasksTable {
  task_id: string;
  /** The order tasks were recorded in (ties of created_at): written by the database. */
  n: ColumnType<number | string, number | undefined, never>;
  session_id: string;
  goal: string;
  status: TaskStatus;
  final_answer: string | null;
  error: string | null;
  steps: ColumnType<number, number | undefined, number>;
  usage: ColumnType<string, string | undefined, string>;
  toolsets_used: ColumnType<string, string | undefined, string>;
  tokens: string | null;
  created_at: string;
  finished_at: string | null;
  pending_approval: string | null;
  resume_state: string | null;
  request: string | null;
  decision: string | null;
  lease_owner: string | null;
  lease_until: NullableInt8;
  fence: ColumnType<number | string, number | undefined, number>;
  /** The thread the task is a turn of (null: a task recorded before threads). */
  thread_id: string | null;
  /** What the turn added to its thread's conversation (JSON), written with its end. */
  transcript: string | null;
  /** How many messages the checkpoint's parts hold (null: a checkpoint of old, its messages in resume_state). */
  checkpoint_messages: ColumnType<number | null, number | null | undefined, number | null>;
}

/** A conversation: its tasks are its turns, in order (each turn's transcript says how its compaction stands). */
export interface ThreadsTable {
  thread_id: string;
  session_id: string;
  /** The credential that made it (a digest, never a token): only it reads the thread. */
  owner: string;
  title: string;
  /** Sent with each of its tasks unless the task names its own (JSON `{url}`). */
  webhook: string | null;
  created_at: string;
  updated_at: string;
}

/** One POST of a task's webhook: what it says, where, and how its delivery goes (store/webhooks.ts). */
export interface WebhookDeliveriesTable {
  /** The `webhook-id`: the same on every attempt, so a receiver drops a repeat. */
  id: string;
  task_id: string;
  kind: WebhookKind;
  /** What happened, one delivery each: `finished`, or `waiting:<call id>` (unique with the task). */
  event_key: string;
  url: string;
  /** The JSON body, bounded (webhooks/message.ts). */
  payload: string;
  status: WebhookDelivery['status'];
  attempts: ColumnType<number, number | undefined, number>;
  /** When it is next due (ms since the epoch). */
  next_at: Int8;
  /** The worker sending it now, and until when (ms): a claim lapses with a worker that stopped mid-POST. */
  lease_owner: string | null;
  lease_until: NullableInt8;
  last_error: string | null;
  created_at: string;
  delivered_at: string | null;
}

export interface AgentDatabase {
  tasks: TasksTable;
  threads: ThreadsTable;
  task_events: {
    task_id: string;
    seq: number;
    type: EventType;
    at: string;
    duration_ms: number | null;
    data: string;
  };
  /** The tool calls of a task's checkpointed reply; `finished` 1 once the call ended. */
  task_calls: { task_id: string; idx: number; call_id: string; finished: number; result: string | null };
  /** A running task's checkpointed conversation in parts: the messages from `start` on (JSON array). */
  task_checkpoint_parts: { task_id: string; start: number; data: string };
  console_logins: {
    id_hash: string;
    kind: 'session' | 'code';
    role: string;
    sealed: string;
    expires_at: Int8;
  };
  webhook_deliveries: WebhookDeliveriesTable;
}
