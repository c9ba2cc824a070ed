import { z } from 'zod';
import { boundedRecord, boundedString, LIMITS } from '../../lib/http/limits.ts';
import { SessionId, ToolsetId } from './base.ts';
import { ToolsetInfo } from './toolsets.ts';

// The gateway's contract, part three: what the operator reviews and decides (approvals, reloads, the policy,
// the audit) and the playbook prompts. contract.ts re-exports it.

// A missing list or hash says how to get one: the hash is what binds the approval to what was reviewed.
const HOW_TO_APPROVE =
  'name each withheld tool as {name, hash} with the hash GET /mcp/admin/toolsets shows for it ' +
  '(toolsets[].withheld[].hash); `toolshift toolsets approve <id>` shows the diff and sends them';
/**
 * What an operator reviewed: each withheld tool by name with the `hash` the listing showed for it. A definition
 * that changed since (another hash now) is not released: an approval binds to what was shown.
 */
export const ApproveToolsetRequest = z.strictObject({
  // boundedList's shape (length checked before the items), with a missing list saying how to get one.
  tools: z
    .array(z.unknown(), {
      error: (iss) => (iss.input === undefined ? `required: ${HOW_TO_APPROVE}` : undefined),
    })
    .max(LIMITS.ids, {
      error: (iss) => `at most ${LIMITS.ids} items (got ${(iss.input as unknown[]).length})`,
    })
    .pipe(
      z.array(
        z.strictObject(
          {
            name: boundedString(LIMITS.id),
            hash: z
              .string({ error: `required: ${HOW_TO_APPROVE}` })
              .regex(/^[0-9a-f]{64}$/, 'must be the 64-hex-digit hash the listing shows (withheld[].hash)'),
          },
          { error: (iss) => (iss.code === 'invalid_type' ? HOW_TO_APPROVE : undefined) },
        ),
      ),
    )
    .refine((tools) => tools.length > 0, `name at least one tool: ${HOW_TO_APPROVE}`),
});

export const ApproveToolsetResponse = z.object({
  toolset_id: z.string(),
  approved: z.array(z.string()),
  /** Named tools whose definition changed since they were shown: still withheld, to be reviewed again. */
  changed_since_shown: z.array(z.object({ name: z.string(), hash: z.string() })),
  toolset: ToolsetInfo.optional(),
});

export const ReloadResponse = z.object({
  added: z.array(z.string()),
  removed: z.array(z.string()),
  changed: z.array(z.string()),
  unchanged: z.array(z.string()),
  warnings: z.array(z.string()),
  /** The policy in force after the reload, in a line: its file, rules and default (or that there is none). */
  policy: z.string(),
});

/** A playbook prompt as listed: its arguments say which are required. */
export const PromptInfo = z.object({
  name: z.string(),
  description: z.string(),
  arguments: z.array(z.object({ name: z.string(), description: z.string(), required: z.boolean() })),
});

export const RenderPromptRequest = z.strictObject({
  arguments: boundedRecord(boundedString(LIMITS.promptArgValue), LIMITS.promptArgs).default({}),
});
export type RenderPromptRequest = z.infer<typeof RenderPromptRequest>;

export const RenderedPrompt = z.object({ name: z.string(), description: z.string(), text: z.string() });
export type RenderedPrompt = z.infer<typeof RenderedPrompt>;

export const PolicyInfo = z.object({
  file: z.string().nullable(),
  default: z.enum(['allow', 'ask', 'deny']),
  rules: z.array(z.record(z.string(), z.unknown())),
  /** Set when the file did not load at start: everything is denied until it is fixed and reloaded. */
  error: z.string().optional(),
});

export const Approval = z.object({
  id: z.string(),
  session_id: z.string(),
  task_id: z.string().nullable(),
  kind: z.enum(['call', 'activate']),
  subject: z.string(),
  arguments: z.record(z.string(), z.unknown()).nullable(),
  reason: z.string(),
  status: z.enum(['pending', 'approved', 'denied', 'expired', 'used']),
  created_at: z.string(),
  expires_at: z.string(),
  /** When it was decided (or expired); null while pending. */
  decided_at: z.string().nullable(),
  /** Who decided: the role of the token that did (`admin`, `user (AGENT_API_TOKEN)`, `local`). */
  decided_by: z.string().nullable(),
  decision_reason: z.string().nullable(),
  /** Whose work asked for it (`user:<id>`); null when no user's (the operator's, an MCP client's token). */
  for_user: z.string().nullable(),
});
export type Approval = z.infer<typeof Approval>;

export const DecideApprovalRequest = z.strictObject({
  approve: z.boolean(),
  reason: boundedString(LIMITS.reason).optional(),
});

export const AuditRow = z.object({
  id: z.number(),
  at: z.string(),
  session_id: z.string().nullable(),
  task_id: z.string().nullable(),
  actor: z.string(),
  kind: z.string(),
  subject: z.string(),
  ok: z.boolean(),
  detail: z.string().nullable(),
  /** Whose work the row is (`user:<id>`); null for the operator's, the system's and rows from before users. */
  for_user: z.string().nullable(),
});

/** What the audit rows are about: an entry's kind. */
export const AUDIT_KINDS = [
  'activate',
  'deactivate',
  'enable',
  'disable',
  'call',
  'manage',
  'list',
  'approve',
  'reload',
  'policy',
  'approval',
  'limit',
  'read',
  'default',
  'grant',
  'drop',
] as const;

const instant = (what: string) =>
  boundedString(LIMITS.cursor).pipe(
    z.string().datetime({ offset: true, message: `${what} must be an ISO 8601 time` }),
  );

/**
 * What the audit listing and its export search by; every filter is exact. `toolset` finds the toolset's own
 * changes and the calls of its tools; `tool` the calls of one tool.
 */
export const AuditSearch = z.object({
  session_id: SessionId.optional(),
  task_id: boundedString(LIMITS.sessionId).optional(),
  since: instant('since').optional(),
  until: instant('until').optional(),
  actor: boundedString(512).optional(),
  kind: z.enum(AUDIT_KINDS).optional(),
  toolset: ToolsetId.optional(),
  tool: boundedString(LIMITS.id).optional(),
  outcome: z.enum(['ok', 'refused']).optional(),
});
export type AuditSearch = z.infer<typeof AuditSearch>;

/** The most audit rows one page holds; with each row's texts capped (AUDIT_TEXT_MAX), a page stays a few MiB. */
export const AUDIT_PAGE_MAX = 1000;

/** A page of the audit trail; `next_cursor` (null on the last page) fetches the next, older one. */
export const AuditPage = z.object({ audit: z.array(AuditRow), next_cursor: z.string().nullable() });
