// The audit trail's rows as written, stored and listed, who acted, and how much of a row is kept.

/** Who acted: the operator, the model in a task, an MCP client (audit-context.ts carries it per request). */
export type { AuditActor } from '../audit-context.ts';

/** One audit line: an admin change or a tool call, allowed or refused. */
export interface AuditEntry {
  session_id: string | null;
  kind:
    | 'activate'
    | 'deactivate'
    | 'enable'
    | 'disable'
    | 'call'
    | 'manage'
    | 'list'
    | 'approve'
    | 'reload'
    | 'policy'
    | 'approval'
    | 'limit'
    | 'read'
    | 'default'
    | 'grant'
    | 'drop';
  subject: string;
  ok: boolean;
  detail?: string;
}

/** An audit row as listed: the entry, when, and who acted (the operator, the model in a task, an MCP client). */
export interface AuditRow {
  id: number;
  at: string;
  session_id: string | null;
  task_id: string | null;
  actor: string;
  kind: string;
  subject: string;
  ok: boolean;
  detail: string | null;
  /** Whose work it is (`user:<id>`); null for the operator's and the system's. */
  for_user: string | null;
}

/**
 * What the audit listing filters on, each exactly; `cursor` is the `next_cursor` of the page before (rows older
 * than it). `subjects`: rows whose subject is one of these, or a comma-separated list holding one.
 */
export interface AuditFilter {
  session_id?: string;
  task_id?: string;
  since?: string;
  until?: string;
  actor?: string;
  kind?: string;
  subjects?: readonly string[];
  ok?: boolean;
  /** Only rows of these users' work (`user:<id>`): what a user who is not the operator may see. */
  for_users?: readonly string[];
  cursor?: string;
  limit: number;
}

/** A page of audit rows, newest first; `next_cursor` is null on the last page. */
export interface AuditPage {
  audit: AuditRow[];
  next_cursor: string | null;
}

/**
 * The most characters an audit row keeps of its subject and of its detail (and the listing serves of a row
 * written before this bound): one request adds a few KiB to the database at most, whatever it carried.
 */
export const AUDIT_SUBJECT_MAX = 512;
export const AUDIT_DETAIL_MAX = 2048;

/**
 * How much of a stored text the listing serves: a row written under the bounds above is served whole, with the
 * marker saying what was cut at write time; a row stored before the bounds is cut here.
 */
export const LISTED_SUBJECT_MAX = AUDIT_SUBJECT_MAX + 64;
export const LISTED_DETAIL_MAX = AUDIT_DETAIL_MAX + 64;

/** `text` cut to `max` characters with a marker saying how much was cut. */
export function clip(text: string, max: number, length = text.length): string {
  return length <= max ? text : `${text.slice(0, max)}… [${length - max} more characters]`;
}
