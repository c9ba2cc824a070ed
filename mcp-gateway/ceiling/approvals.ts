import { createHash, randomBytes } from 'node:crypto';
import type { ApprovalQueries, ApprovalRow } from '../store/interface.ts';

export type { ApprovalQueries, ApprovalRow };

// Human approvals of what the policy says to `ask` about: a call (tool + exact arguments) or a toolset's
// activation, in one session. A pending approval is decided once (approve or deny) by the operator or a user
// of the agent's API; an approved one is used by the next identical request and then spent; one left
// pending past the timeout expires.

/** What needs a yes: a call of a tool with its arguments, or a toolset's activation. */
export interface ApprovalSubject {
  session_id: string;
  task_id?: string;
  kind: 'call' | 'activate';
  subject: string;
  arguments?: Record<string, unknown>;
  reason: string;
  /** Whose work asks (`user:<id>`), when a user's. */
  for_user?: string;
}

/** An approval as listed and as sent to the agent. */
export interface Approval {
  id: string;
  session_id: string;
  task_id: string | null;
  kind: 'call' | 'activate';
  subject: string;
  arguments: Record<string, unknown> | null;
  reason: string;
  status: 'pending' | 'approved' | 'denied' | 'expired' | 'used';
  created_at: string;
  expires_at: string;
  /** When it was decided (or expired); null while pending. */
  decided_at: string | null;
  decided_by: string | null;
  decision_reason: string | null;
  /** Whose work asked for it (`user:<id>`); null when no user's. */
  for_user: string | null;
}

/** Which approvals a listing shows; `for_users`: only those of these users' work (absent: everyone's). */
export interface ApprovalListing {
  status?: string;
  session_id?: string;
  for_users?: readonly string[];
  limit: number;
}

/** JSON with sorted keys, so the same arguments in another key order are the same call. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The most of a call's arguments an approval row keeps to show the approver (the hash binds the whole call). */
export const APPROVAL_ARGUMENTS_MAX = 16 * 1024;

/**
 * The arguments as stored for the approver: whole when small; otherwise a summary with their size, hash and the
 * start of their JSON, so a pending approval of a 16 MiB write costs the database 16 KiB, not 16 MiB.
 */
function storedArguments(args: Record<string, unknown>, hash: string): string {
  const text = JSON.stringify(args);
  if (text.length <= APPROVAL_ARGUMENTS_MAX) return text;
  return JSON.stringify({
    _summary: `arguments of ${text.length} characters, cut to the first ${APPROVAL_ARGUMENTS_MAX} to show`,
    sha256: hash,
    preview: text.slice(0, APPROVAL_ARGUMENTS_MAX),
  });
}

const hashOf = (args: Record<string, unknown> | undefined) =>
  createHash('sha256')
    .update(canonical(args ?? {}))
    .digest('hex');

/** An approval as the API shows it: its times as ISO text, when it expires, its arguments parsed. */
const shown = (r: ApprovalRow, timeoutMs: number): Approval => ({
  ...r,
  arguments: r.arguments === null ? null : JSON.parse(r.arguments),
  created_at: new Date(r.created_at).toISOString(),
  expires_at: new Date(r.created_at + timeoutMs).toISOString(),
  decided_at: r.decided_at == null ? null : new Date(Number(r.decided_at)).toISOString(),
});

/**
 * Approvals over `q`, whichever database answers it. Each step is one short transaction of its own statements
 * (expiring the overdue ones first, so what is read is current).
 */
export function approvalStore(q: ApprovalQueries, opts: { timeoutMs: number; now?: () => number }) {
  const now = opts.now ?? Date.now;
  const show = (r: ApprovalRow) => shown(r, opts.timeoutMs);
  const expire = (on: ApprovalQueries) => on.expire(opts.timeoutMs, now() - opts.timeoutMs);
  /** The approval of exactly this request, of this user's work, in `status`. */
  const find = (on: ApprovalQueries, s: ApprovalSubject, status: ApprovalRow['status']) =>
    on.find(s.session_id, s.kind, s.subject, hashOf(s.arguments), status, s.for_user);
  return {
    /** Whether an approved, unused approval of exactly this request exists (without spending it). */
    approved: async (s: ApprovalSubject): Promise<boolean> => {
      await expire(q);
      return (await find(q, s, 'approved')) !== undefined;
    },
    /**
     * Spends an approved, unused approval of each request, all or none: the approvals, or null when one has
     * none (never approved, or spent meanwhile by another gateway sharing the database).
     */
    spend: async (subjects: readonly ApprovalSubject[]): Promise<Approval[] | null> => {
      const none = new Error('not approved');
      try {
        return await q.transaction(async (tx) => {
          await expire(tx);
          const spent: Approval[] = [];
          for (const s of subjects) {
            const row = await find(tx, s, 'approved');
            if (!row || !(await tx.spend(row.id))) throw none;
            spent.push(show({ ...row, status: 'used' }));
          }
          return spent;
        });
      } catch (err) {
        if (err === none) return null;
        throw err;
      }
    },
    /** The pending approval of exactly this request, created if there is none. */
    request: (s: ApprovalSubject): Promise<Approval> =>
      q.transaction(async (tx) => {
        await expire(tx);
        const hash = hashOf(s.arguments);
        const existing = await find(tx, s, 'pending');
        if (existing) return show(existing);
        const id = `apr_${randomBytes(12).toString('base64url')}`;
        await tx.insert({
          id,
          session_id: s.session_id,
          task_id: s.task_id ?? null,
          kind: s.kind,
          subject: s.subject,
          arguments: s.arguments ? storedArguments(s.arguments, hash) : null,
          args_hash: hash,
          reason: s.reason,
          created_at: now(),
          for_user: s.for_user ?? null,
        });
        // Another gateway on the same database may have asked the same a moment before: that one stands.
        const row = (await tx.get(id)) ?? (await find(tx, s, 'pending'));
        return show(row as ApprovalRow);
      }),
    /** Decides a pending approval; null when it does not exist, or the current row when it was not pending. */
    decide: (
      id: string,
      approve: boolean,
      by: string,
      reason?: string,
    ): Promise<{ approval: Approval; changed: boolean } | null> =>
      q.transaction(async (tx) => {
        await expire(tx);
        const changed = (await tx.decide(approve ? 'approved' : 'denied', now(), by, reason ?? null, id)) > 0;
        const row = await tx.get(id);
        return row ? { approval: show(row), changed } : null;
      }),
    get: async (id: string): Promise<Approval | null> => {
      await expire(q);
      const row = await q.get(id);
      return row ? show(row) : null;
    },
    /** Retention (lib/db/retention.ts): deletes at most `limit` approvals decided (or expired) before `before` (ms). */
    async prune(before: number, limit: number): Promise<number> {
      await expire(q);
      return q.prune(before, limit);
    },
    /** Newest first. */
    async list(filter: ApprovalListing): Promise<Approval[]> {
      await expire(q);
      const rows = await q.list({
        status: filter.status ?? null,
        session_id: filter.session_id ?? null,
        for_users: filter.for_users ?? null,
        limit: filter.limit,
      });
      return rows.map(show);
    },
  };
}

/** The approvals table, on either database. */
export type ApprovalStore = ReturnType<typeof approvalStore>;
