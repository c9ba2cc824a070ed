import { type Kysely, sql } from 'kysely';
import {
  AUDIT_DETAIL_MAX,
  AUDIT_SUBJECT_MAX,
  type AuditActor,
  type AuditEntry,
  type AuditFilter,
  type AuditPage,
  type AuditRow,
  clip,
  LISTED_DETAIL_MAX,
  LISTED_SUBJECT_MAX,
} from './audit.ts';
import type { AuditInsert, DialectHooks } from './dialect.ts';
import type { GatewayDatabase } from './schema.ts';

// The audit trail's statements: rows queued and appended together a few milliseconds later (every tool call
// writes one), the listing a page at a time by id (keyset paging: page 1,000 costs what page 1 does), and
// retention.

/** The most audit rows written in one go. */
const AUDIT_BATCH = 500;
/** How long audit rows wait to be written together. */
const AUDIT_DELAY_MS = 5;
/** An id beyond any row's. */
const NO_ID = Number.MAX_SAFE_INTEGER;

/** The rows queued to be appended together, and the appends under way. */
interface AuditQueue {
  readonly db: Kysely<GatewayDatabase>;
  readonly hooks: DialectHooks;
  readonly onWriteError: (err: unknown) => void;
  pending: AuditInsert[];
  timer: NodeJS.Timeout | null;
  /** The appends under way, one after the other; never rejects (a failure goes to onWriteError). */
  writing: Promise<void>;
}

export function auditTrail(
  db: Kysely<GatewayDatabase>,
  hooks: DialectHooks,
  onWriteError: (err: unknown) => void,
) {
  const q: AuditQueue = { db, hooks, onWriteError, pending: [], timer: null, writing: Promise.resolve() };
  const flush = (): Promise<void> => flushAudit(q);
  return {
    /** Appends what is queued now; resolves once it (and what was appended before it) is written. */
    flush,
    /** The first row written at or after `at` (rows are appended in time order). */
    firstSince: (at: string): Promise<number | undefined> => firstSince(db, at),
    /** Queues a row with its actor; its values are taken now (the entry may change after this call). */
    audit: (entry: AuditEntry, who: AuditActor): void => queueAudit(q, entry, who),
    /** A page of rows, newest first; a listed row's texts are cut in SQL (an old row may hold megabytes). */
    async listAudit(filter: AuditFilter): Promise<AuditPage> {
      await flush();
      return listAudit(db, hooks, filter);
    },
    /** Retention (lib/db/retention.ts): deletes at most `limit` rows written before `before` (ISO). */
    async pruneAudit(before: string, limit: number): Promise<number> {
      const oldest = db.selectFrom('audit').select('id').where('at', '<', before).orderBy('at').limit(limit);
      const res = await db.deleteFrom('audit').where('id', 'in', oldest).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
    /** Deletes at most `limit` of the oldest rows beyond the newest `maxRows`. */
    async pruneAuditOverflow(maxRows: number, limit: number): Promise<number> {
      const counted = await db
        .selectFrom('audit')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .executeTakeFirstOrThrow();
      const over = Number(counted.n) - maxRows;
      if (over <= 0) return 0;
      const oldest = db.selectFrom('audit').select('id').orderBy('id').limit(Math.min(over, limit));
      const res = await db.deleteFrom('audit').where('id', 'in', oldest).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
    /** Writes what is queued and stops queueing timers. */
    async close(): Promise<void> {
      await flush();
    },
  };
}

export type AuditTrail = ReturnType<typeof auditTrail>;

function queueAudit(q: AuditQueue, entry: AuditEntry, who: AuditActor): void {
  q.pending.push({
    at: new Date().toISOString(),
    session_id: entry.session_id === null ? null : clip(entry.session_id, AUDIT_SUBJECT_MAX),
    kind: entry.kind,
    subject: clip(entry.subject, AUDIT_SUBJECT_MAX),
    ok: entry.ok ? 1 : 0,
    detail: entry.detail === undefined ? null : clip(entry.detail, AUDIT_DETAIL_MAX),
    actor: clip(who.actor, AUDIT_SUBJECT_MAX),
    task_id: who.task_id === undefined ? null : clip(who.task_id, AUDIT_SUBJECT_MAX),
    for_user: who.for_user ?? null,
  });
  // A failed append is reported to onWriteError inside writeAudit(); nothing is left to reject here.
  if (q.pending.length >= AUDIT_BATCH) flushAudit(q).catch(q.onWriteError);
  else q.timer ??= setTimeout(() => flushAudit(q).catch(q.onWriteError), AUDIT_DELAY_MS);
}

function flushAudit(q: AuditQueue): Promise<void> {
  if (q.timer) clearTimeout(q.timer);
  q.timer = null;
  if (q.pending.length > 0) {
    const rows = q.pending;
    q.pending = [];
    q.writing = q.writing.then(() => writeAudit(q, rows));
  }
  return q.writing;
}

async function writeAudit(q: AuditQueue, rows: AuditInsert[]): Promise<void> {
  for (let i = 0; i < rows.length; i += AUDIT_BATCH) {
    try {
      await q.hooks.appendAudit(q.db, rows.slice(i, i + AUDIT_BATCH));
    } catch (err) {
      q.onWriteError(err);
    }
  }
}

async function firstSince(db: Kysely<GatewayDatabase>, at: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('audit')
    .select('id')
    .where('at', '>=', at)
    .orderBy('at')
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return row ? Number(row.id) : undefined;
}

/** The last row written at or before `at`. */
async function lastUntil(db: Kysely<GatewayDatabase>, at: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('audit')
    .select('id')
    .where('at', '<=', at)
    .orderBy('at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ? Number(row.id) : undefined;
}

async function listAudit(
  db: Kysely<GatewayDatabase>,
  hooks: DialectHooks,
  filter: AuditFilter,
): Promise<AuditPage> {
  const none = { audit: [], next_cursor: null };
  if (filter.subjects?.length === 0 || filter.for_users?.length === 0) return none;
  const from = filter.since ? await firstSince(db, filter.since) : 1;
  const to = filter.until ? await lastUntil(db, filter.until) : NO_ID;
  if (from === undefined || to === undefined) return none;
  let q = db
    .selectFrom('audit')
    .select([
      'id',
      'at',
      'session_id',
      'task_id',
      'actor',
      'kind',
      sql<string>`substr(subject, 1, ${sql.lit(LISTED_SUBJECT_MAX)})`.as('subject'),
      sql<number>`length(subject)`.as('subject_length'),
      'ok',
      sql<string | null>`substr(detail, 1, ${sql.lit(LISTED_DETAIL_MAX)})`.as('detail'),
      sql<number | null>`length(detail)`.as('detail_length'),
      'for_user',
    ])
    .where('id', '<', filter.cursor ? Number(filter.cursor) : NO_ID)
    .where('id', '>=', from);
  // One condition per filter given, each able to walk its index (an `x IS NULL OR` filter could not).
  for (const column of ['session_id', 'task_id', 'actor', 'kind'] as const) {
    const value = filter[column];
    if (value !== undefined) q = q.where(column, '=', value);
  }
  if (filter.ok !== undefined) q = q.where('ok', '=', filter.ok ? 1 : 0);
  if (filter.subjects) q = q.where(hooks.subjectIn(filter.subjects));
  if (filter.for_users) q = q.where('for_user', 'in', filter.for_users);
  if (filter.until) q = q.where('id', '<=', to);
  const rows = await q.orderBy('id', 'desc').limit(filter.limit).execute();
  const audit: AuditRow[] = rows.map(({ subject_length, detail_length, ...r }) => ({
    ...r,
    id: Number(r.id),
    subject: clip(r.subject, LISTED_SUBJECT_MAX, Number(subject_length)),
    detail: r.detail === null ? null : clip(r.detail, LISTED_DETAIL_MAX, Number(detail_length ?? 0)),
    ok: r.ok === 1,
    actor: r.actor ?? 'unknown',
  }));
  const last = audit.at(-1);
  return { audit, next_cursor: audit.length === filter.limit && last ? String(last.id) : null };
}
