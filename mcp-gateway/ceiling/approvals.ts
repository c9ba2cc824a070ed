import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../../lib/sqlite.ts';

// Human approvals of what the policy says to `ask` about: a call (tool + exact arguments) or a toolset's
// activation, in one session. A pending approval is decided once (approve or deny) by the operator or a user
// of the agent's API; an approved one is used by the next identical request and then spent; one left
// pending past the timeout expires.

const SCHEMA = `
CREATE TABLE IF NOT EXISTS approvals (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  task_id TEXT,
  kind TEXT NOT NULL,
  subject TEXT NOT NULL,
  arguments TEXT,
  args_hash TEXT NOT NULL,
  reason TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  decided_at INTEGER,
  decided_by TEXT,
  decision_reason TEXT
);
CREATE INDEX IF NOT EXISTS approvals_key ON approvals (session_id, kind, subject, args_hash, status);
`;

/** What needs a yes: a call of a tool with its arguments, or a toolset's activation. */
export interface ApprovalSubject {
  session_id: string;
  task_id?: string;
  kind: 'call' | 'activate';
  subject: string;
  arguments?: Record<string, unknown>;
  reason: string;
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
}

export interface ApprovalRow {
  id: string;
  session_id: string;
  task_id: string | null;
  kind: 'call' | 'activate';
  subject: string;
  arguments: string | null;
  reason: string;
  status: Approval['status'];
  created_at: number;
  decided_at?: number | null;
  decided_by: string | null;
  decision_reason: string | null;
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

/** The statements approvals need: SQLite's below, PostgreSQL's in store/postgres.ts. */
export interface ApprovalQueries {
  /** Marks pending approvals created before `before` (ms) expired, dated `timeoutMs` after their creation. */
  expire(timeoutMs: number, before: number): void;
  find(
    session: string,
    kind: string,
    subject: string,
    hash: string,
    status: Approval['status'],
  ): ApprovalRow | undefined;
  insert(row: Omit<ApprovalRow, 'status' | 'decided_by' | 'decision_reason'> & { args_hash: string }): void;
  /** Marks an approved approval used; false when it was not approved any more (another spent it). */
  spend(id: string): boolean;
  get(id: string): ApprovalRow | undefined;
  /** Decides a pending approval; the rows changed (0: it was not pending). */
  decide(status: 'approved' | 'denied', at: number, by: string, reason: string | null, id: string): number;
  prune(before: number, limit: number): number;
  list(filter: { status: string | null; session_id: string | null; limit: number }): ApprovalRow[];
  transaction<T>(work: () => T): T;
}

/** The SQLite statements of the approvals table (created if needed). */
export function sqliteApprovalQueries(db: Db): ApprovalQueries {
  db.exec(SCHEMA);
  const q = {
    // Dated when it expired, not when that was noticed, so retention counts its age from then.
    expire: db.prepare(
      "UPDATE approvals SET status = 'expired', decided_at = created_at + ? WHERE status = 'pending' AND created_at < ?",
    ),
    find: db.prepare<[string, string, string, string, string], ApprovalRow>(
      `SELECT * FROM approvals WHERE session_id = ? AND kind = ? AND subject = ? AND args_hash = ? AND status = ?
       ORDER BY created_at LIMIT 1`,
    ),
    insert: db.prepare(
      `INSERT INTO approvals (id, session_id, task_id, kind, subject, arguments, args_hash, reason, status, created_at)
       VALUES (@id, @session_id, @task_id, @kind, @subject, @arguments, @args_hash, @reason, 'pending', @created_at)`,
    ),
    spend: db.prepare("UPDATE approvals SET status = 'used' WHERE id = ? AND status = 'approved'"),
    get: db.prepare<[string], ApprovalRow>('SELECT * FROM approvals WHERE id = ?'),
    decide: db.prepare(
      "UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, decision_reason = ? WHERE id = ? AND status = 'pending'",
    ),
    // Decided, expired and used ones only: a pending approval is what a paused task waits for.
    prune: db.prepare(
      `DELETE FROM approvals WHERE id IN (SELECT id FROM approvals WHERE status != 'pending'
       AND COALESCE(decided_at, created_at) < ? LIMIT ?)`,
    ),
    list: db.prepare<{ status: string | null; session_id: string | null; limit: number }, ApprovalRow>(
      `SELECT * FROM approvals WHERE (@status IS NULL OR status = @status)
       AND (@session_id IS NULL OR session_id = @session_id) ORDER BY created_at DESC LIMIT @limit`,
    ),
  };
  return {
    expire: (timeoutMs, before) => void q.expire.run(timeoutMs, before),
    find: (...args) => q.find.get(...args),
    insert: (row) => void q.insert.run(row),
    spend: (id) => q.spend.run(id).changes > 0,
    get: (id) => q.get.get(id),
    decide: (...args) => q.decide.run(...args).changes,
    prune: (before, limit) => q.prune.run(before, limit).changes,
    list: (filter) => q.list.all(filter),
    transaction: (work) => db.transaction(work)(),
  };
}

/** The approvals table (SQLite, created if needed); `timeoutMs` is how long a request may stay pending. */
export function createApprovalStore(db: Db, opts: { timeoutMs: number; now?: () => number }): ApprovalStore {
  return approvalStore(sqliteApprovalQueries(db), opts);
}

/** Approvals over `q`, whichever database answers it. */
export function approvalStore(q: ApprovalQueries, opts: { timeoutMs: number; now?: () => number }) {
  const now = opts.now ?? Date.now;
  const show = (r: ApprovalRow): Approval => ({
    ...r,
    arguments: r.arguments === null ? null : JSON.parse(r.arguments),
    created_at: new Date(r.created_at).toISOString(),
    expires_at: new Date(r.created_at + opts.timeoutMs).toISOString(),
    decided_at: r.decided_at == null ? null : new Date(Number(r.decided_at)).toISOString(),
  });
  const expire = () => q.expire(opts.timeoutMs, now() - opts.timeoutMs);
  return {
    /** Whether an approved, unused approval of exactly this request exists (without spending it). */
    approved: (s: ApprovalSubject): boolean => {
      expire();
      return q.find(s.session_id, s.kind, s.subject, hashOf(s.arguments), 'approved') !== undefined;
    },
    /**
     * Spends an approved, unused approval of each request, all or none: the approvals, or null when one has
     * none (never approved, or spent meanwhile by another gateway sharing the database).
     */
    spend: (subjects: readonly ApprovalSubject[]): Approval[] | null => {
      const none = new Error('not approved');
      try {
        return q.transaction(() => {
          expire();
          return subjects.map((s) => {
            const row = q.find(s.session_id, s.kind, s.subject, hashOf(s.arguments), 'approved');
            if (!row || !q.spend(row.id)) throw none;
            return show({ ...row, status: 'used' });
          });
        });
      } catch (err) {
        if (err === none) return null;
        throw err;
      }
    },
    /** The pending approval of exactly this request, created if there is none. */
    request: (s: ApprovalSubject): Approval =>
      q.transaction(() => {
        expire();
        const hash = hashOf(s.arguments);
        const existing = q.find(s.session_id, s.kind, s.subject, hash, 'pending');
        if (existing) return show(existing);
        const id = `apr_${randomBytes(12).toString('base64url')}`;
        q.insert({
          id,
          session_id: s.session_id,
          task_id: s.task_id ?? null,
          kind: s.kind,
          subject: s.subject,
          arguments: s.arguments ? storedArguments(s.arguments, hash) : null,
          args_hash: hash,
          reason: s.reason,
          created_at: now(),
        });
        // Another gateway on the same database may have asked the same a moment before: that one stands.
        return show(q.get(id) ?? (q.find(s.session_id, s.kind, s.subject, hash, 'pending') as ApprovalRow));
      }),
    /** Decides a pending approval; null when it does not exist, or the current row when it was not pending. */
    decide: (
      id: string,
      approve: boolean,
      by: string,
      reason?: string,
    ): { approval: Approval; changed: boolean } | null =>
      q.transaction(() => {
        expire();
        const changed = q.decide(approve ? 'approved' : 'denied', now(), by, reason ?? null, id) > 0;
        const row = q.get(id);
        return row ? { approval: show(row), changed } : null;
      }),
    get: (id: string): Approval | null => {
      expire();
      const row = q.get(id);
      return row ? show(row) : null;
    },
    /** Retention (lib/retention.ts): deletes at most `limit` approvals decided (or expired) before `before` (ms). */
    prune(before: number, limit: number): number {
      expire();
      return q.prune(before, limit);
    },
    list(filter: { status?: string; session_id?: string; limit: number }): Approval[] {
      expire();
      return q
        .list({ status: filter.status ?? null, session_id: filter.session_id ?? null, limit: filter.limit })
        .map(show);
    },
  };
}

/** The approvals table, on either database. */
export type ApprovalStore = ReturnType<typeof approvalStore>;
