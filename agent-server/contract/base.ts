import { z } from 'zod';
import { boundedString, LIMITS } from '../../lib/http/limits.ts';

// The agent-server's contract, part one: what a task is made of (its exposure, usage, status, token totals, a
// pending approval). contract.ts re-exports it.

/**
 * How a task offers tools to the model: `native`, the tools array follows the active toolsets; `dispatch`, the
 * array stays `[manage_toolsets, call_tool]` (prompt caches hold) and activations return the tools' definitions.
 */
export const ToolExposure = z.enum(['auto', 'native', 'dispatch', 'code']);
export type ToolExposure = z.infer<typeof ToolExposure>;

export const Usage = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
  /** Prompt tokens the provider served from its cache (in `prompt_tokens`), when it reports them. */
  cached_tokens: z.number().optional(),
  /** Prompt tokens written to the provider's cache (in `prompt_tokens`; Anthropic reports them). */
  cache_write_tokens: z.number().optional(),
});
export type Usage = z.infer<typeof Usage>;

export const TaskStatus = z.enum([
  'queued',
  'running',
  'awaiting_approval',
  'awaiting_consent',
  'completed',
  'failed',
  'max_steps',
  'cancelled',
  'timed_out',
]);
export type TaskStatus = z.infer<typeof TaskStatus>;

/** A paused task's statuses: waiting for a human's decision, or for its owner to connect their own account. */
export const WAITING_STATUSES = ['awaiting_approval', 'awaiting_consent'] as const;
/** The statuses of a task not ended yet. */
export const LIVE_STATUSES = ['queued', 'running', ...WAITING_STATUSES] as const;
/** Whether a task in `status` has not ended yet (it runs, waits in the queue, or waits paused). */
export const isLive = (status: string): status is (typeof LIVE_STATUSES)[number] =>
  (LIVE_STATUSES as readonly string[]).includes(status);

/** Tokens counted by toolshift's tokenizer (beside the provider's `usage`), summed over a task's model requests. */
export const TokenTotals = z.object({
  tokenizer: z.string(),
  /** Model requests made. */
  requests: z.number(),
  /** Tool-definition tokens sent, summed over the requests. */
  tool_definition_tokens: z.number(),
  /**
   * What the requests' tool definitions would have cost with every enabled toolset loaded (for the saving),
   * counting the toolsets whose definitions are known: a lower bound when `all_toolsets_not_counted` names any.
   */
  all_toolsets_tool_tokens: z.number(),
  /** Enabled toolsets left out of `all_toolsets_tool_tokens`: upstream servers not started yet (tools unknown). */
  all_toolsets_not_counted: z.array(z.string()).optional(),
  /** Message tokens sent, summed over the requests (an estimate of the prompt without the tools). */
  message_tokens: z.number(),
});
export type TokenTotals = z.infer<typeof TokenTotals>;

export const FinalStatus = z.enum(['completed', 'failed', 'max_steps', 'cancelled', 'timed_out']);
export type FinalStatus = z.infer<typeof FinalStatus>;

/** A tool call (or activation) of a task that waits for a human yes. */
export const PendingApproval = z.object({
  task_id: z.string(),
  call_id: z.string(),
  approval_id: z.string(),
  /** `unknown_outcome`: a call started before its worker stopped and may have run; approve runs it again. */
  kind: z.enum(['call', 'activate', 'unknown_outcome']),
  subject: z.string(),
  arguments: z.record(z.string(), z.unknown()).nullable(),
  reason: z.string(),
  expires_at: z.string(),
});
export type PendingApproval = z.infer<typeof PendingApproval>;

/**
 * A tool call (or activation) of a task that waits for its owner to connect their own account for a toolset
 * (the gateway refused it with consent_required); the call is made again once they have.
 */
export const PendingConsent = z.object({
  task_id: z.string(),
  call_id: z.string(),
  kind: z.literal('consent'),
  toolset: z.string(),
  /** Where the person connects it (the console's page), when the gateway names one. */
  connect_url: z.string().nullable(),
  /** Whose account: the task's owner, `user:<id>`. */
  owner: z.string(),
  step: z.number(),
  /** When the task stops waiting and fails (CONSENT_TIMEOUT_S after the refusal). */
  expires_at: z.string(),
});
export type PendingConsent = z.infer<typeof PendingConsent>;

/**
 * Where a task's end, and each wait for a human, is POSTed (README "Webhooks"): an http or https URL, checked
 * at submission by the same address guard as the web tools (AGENT_WEBHOOK_ALLOW_HOSTS opens it to a private
 * host).
 */
export const Webhook = z.strictObject({
  url: boundedString(LIMITS.url).refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), {
    message: 'must be an absolute http or https URL, e.g. https://example.com/hooks/toolshift',
  }),
});
export type Webhook = z.infer<typeof Webhook>;

/** What a task's webhook POSTs are about: its end, or a wait for a human. */
export const WebhookKind = z.enum(['task.finished', 'task.waiting']);
export type WebhookKind = z.infer<typeof WebhookKind>;

/** One POST of a task's webhook and how its delivery went (its id is the `webhook-id` header, kept across retries). */
export const WebhookDelivery = z.object({
  id: z.string(),
  kind: WebhookKind,
  /** `pending`: not yet answered with a 2xx (retried with backoff); `failed`: given up (AGENT_WEBHOOK_MAX_AGE_S). */
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.number(),
  last_error: z.string().nullable(),
  created_at: z.string(),
  delivered_at: z.string().nullable(),
});
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;
