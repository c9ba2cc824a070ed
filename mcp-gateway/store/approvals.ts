import { type Kysely, type Selectable, sql } from 'kysely';
import { statement } from '../../lib/db/kysely.ts';
import type { ApprovalQueries, ApprovalRow } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

// The statements of human approvals (ceiling/approvals.ts keeps their rules: what is asked, decided, spent).
// Two replicas asking for one request find one pending approval (the unique index approvals_one_pending); a
// second replica spending the same approval waits for the first's commit, then finds it used.

type Stored = Selectable<GatewayDatabase['approvals']>;

/** A row as the rules read it: times as numbers on both databases. */
const row = (r: Stored): ApprovalRow => ({
  ...r,
  kind: r.kind as ApprovalRow['kind'],
  status: r.status as ApprovalRow['status'],
  created_at: Number(r.created_at),
  decided_at: r.decided_at === null ? null : Number(r.decided_at),
});

type Db = Kysely<GatewayDatabase>;

/** The approvals' statements asked on every approval step, each compiled once. */
function approvalStatements(db: Db) {
  return {
    // Dated when it expired, not when that was noticed, so retention counts its age from then.
    expire: statement(db, ['timeout', 'before'], (k, a: { timeout: number; before: number }) =>
      k
        .updateTable('approvals')
        .set({ status: 'expired', decided_at: sql<number>`created_at + ${a.timeout}` })
        .where('status', '=', 'pending')
        .where('created_at', '<', a.before),
    ),
    // Of the same user's work (`user`: '' for nobody's): one user never meets another's approval.
    find: statement(
      db,
      ['session', 'kind', 'subject', 'hash', 'status', 'user'],
      (
        k,
        a: { session: string; kind: string; subject: string; hash: string; status: string; user: string },
      ) =>
        k
          .selectFrom('approvals')
          .selectAll()
          .where('session_id', '=', a.session)
          .where('kind', '=', a.kind)
          .where('subject', '=', a.subject)
          .where('args_hash', '=', a.hash)
          .where('status', '=', a.status)
          .where(sql<string>`COALESCE(for_user, '')`, '=', a.user)
          .orderBy('created_at')
          .limit(1),
    ),
    get: statement(db, ['id'], (k, a: { id: string }) =>
      k.selectFrom('approvals').selectAll().where('id', '=', a.id),
    ),
    spend: statement(db, ['id'], (k, a: { id: string }) =>
      k
        .updateTable('approvals')
        .set({ status: 'used' })
        .where('id', '=', a.id)
        .where('status', '=', 'approved'),
    ),
  };
}

/** The approval statements on `db` (the store's handle), each step's transaction on its own statements. */
export function approvalQueries(db: Db): ApprovalQueries {
  const q = approvalStatements(db);
  const on = (x: Db): ApprovalQueries => ({
    async expire(timeoutMs, before) {
      await q.expire(x, { timeout: timeoutMs, before });
    },
    async find(session, kind, subject, hash, status, forUser) {
      const [r] = (await q.find(x, { session, kind, subject, hash, status, user: forUser ?? '' })).rows;
      return r && row(r);
    },
    async insert(r) {
      await x
        .insertInto('approvals')
        .values({
          id: r.id,
          session_id: r.session_id,
          task_id: r.task_id,
          kind: r.kind,
          subject: r.subject,
          arguments: r.arguments,
          args_hash: r.args_hash,
          reason: r.reason,
          status: 'pending',
          created_at: r.created_at,
          for_user: r.for_user,
        })
        .onConflict((oc) => oc.doNothing())
        .execute();
    },
    spend: async (id) => Number((await q.spend(x, { id })).numAffectedRows ?? 0) > 0,
    async get(id) {
      const [r] = (await q.get(x, { id })).rows;
      return r && row(r);
    },
    async decide(status, at, by, reason, id) {
      const res = await x
        .updateTable('approvals')
        .set({ status, decided_at: at, decided_by: by, decision_reason: reason })
        .where('id', '=', id)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      return Number(res.numUpdatedRows);
    },
    // Decided, expired and used ones only: a pending approval is what a paused task waits for.
    async prune(before, limit) {
      const old = x
        .selectFrom('approvals')
        .select('id')
        .where('status', '!=', 'pending')
        .where((eb) => eb(eb.fn.coalesce('decided_at', 'created_at'), '<', before))
        .limit(limit);
      const res = await x.deleteFrom('approvals').where('id', 'in', old).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
    async list(f) {
      if (f.for_users?.length === 0) return [];
      const rows = await x
        .selectFrom('approvals')
        .selectAll()
        .$if(f.status !== null, (k) => k.where('status', '=', f.status as string))
        .$if(f.session_id !== null, (k) => k.where('session_id', '=', f.session_id as string))
        .$if(f.for_users !== null, (k) => k.where('for_user', 'in', f.for_users as readonly string[]))
        .orderBy('created_at', 'desc')
        .limit(f.limit)
        .execute();
      return rows.map(row);
    },
    transaction: (work) => x.transaction().execute((trx) => work(on(trx))),
  });
  return on(db);
}
