import { randomUUID } from 'node:crypto';
import type { PendingApproval, PendingConsent, Usage, Webhook } from '../contract.ts';
import type { TaskOutcome, WebhookToSend } from '../store/interface.ts';

// What a task's webhook POSTs say (README "Webhooks"): `{type, timestamp, data}` as Standard Webhooks has it,
// bounded: the final answer and the error are cut (and `final_answer_truncated` says so), so a body stays a
// few tens of KiB whatever the task wrote.

/** The most characters of a final answer a POST carries (the whole one is at GET /agent/tasks/{id}). */
export const MAX_ANSWER_CHARS = 16 * 1024;
/** The most characters of an error a POST carries. */
const MAX_ERROR_CHARS = 4 * 1024;

/** The task a POST is about, as it stands when it ends or waits. */
interface TaskState {
  taskId: string;
  /** The conversation it belongs to (null: none). */
  threadId?: string | null;
  status: TaskOutcome['status'] | 'awaiting_approval' | 'awaiting_consent';
  final_answer?: string | null;
  error?: string | null;
  steps: number;
  usage?: Usage;
}

/** The task's webhook, and the conversation it belongs to, as its request carries them. */
export interface WebhookOf {
  taskId: string;
  webhook?: Webhook;
  threadId?: string | null;
}

/** The POST of a task's end, when the task names a webhook. */
export function finishedMessage(task: WebhookOf, outcome: TaskOutcome): WebhookToSend | undefined {
  if (!task.webhook) return undefined;
  return message(task.webhook, 'task.finished', 'finished', { ...task, ...outcome }, null);
}

/**
 * The POST of a task's wait for a human (one per call it waits for: a decision, or its owner's consent), when
 * the task names a webhook.
 */
export function waitingMessage(
  task: WebhookOf,
  pending: PendingApproval | PendingConsent,
  steps: number,
): WebhookToSend | undefined {
  if (!task.webhook) return undefined;
  const status = pending.kind === 'consent' ? 'awaiting_consent' : 'awaiting_approval';
  const key = `${pending.kind === 'consent' ? 'consent' : 'waiting'}:${pending.call_id}`;
  return message(task.webhook, 'task.waiting', key, { ...task, status, steps }, pending);
}

function message(
  webhook: Webhook,
  kind: WebhookToSend['kind'],
  key: string,
  task: TaskState,
  pending: PendingApproval | PendingConsent | null,
): WebhookToSend {
  const answer = task.final_answer ?? null;
  const cut = answer !== null && answer.length > MAX_ANSWER_CHARS;
  const payload = {
    type: kind,
    timestamp: new Date().toISOString(),
    data: {
      task_id: task.taskId,
      thread_id: task.threadId ?? null,
      status: task.status,
      final_answer: cut ? answer.slice(0, MAX_ANSWER_CHARS) : answer,
      ...(cut ? { final_answer_truncated: true } : {}),
      error: task.error ? task.error.slice(0, MAX_ERROR_CHARS) : null,
      steps: task.steps,
      usage: task.usage ?? null,
      pending_approval: pending && pending.kind !== 'consent' ? approvalPart(pending) : null,
      ...(pending?.kind === 'consent' ? { pending_consent: consentPart(pending) } : {}),
    },
  };
  return { id: `msg_${randomUUID()}`, kind, key, url: webhook.url, payload: JSON.stringify(payload) };
}

/** What a POST says of the approval a task waits for. */
const approvalPart = (pending: PendingApproval) => ({
  call_id: pending.call_id,
  approval_id: pending.approval_id,
  kind: pending.kind,
  subject: pending.subject.slice(0, 1024),
  reason: pending.reason.slice(0, MAX_ERROR_CHARS),
  expires_at: pending.expires_at,
});

/** What a POST says of the account a task waits for its owner to connect, and where they connect it. */
const consentPart = (pending: PendingConsent) => ({
  call_id: pending.call_id,
  toolset: pending.toolset,
  connect_url: pending.connect_url,
  expires_at: pending.expires_at,
});
