import { type Kysely, type Selectable, sql } from 'kysely';
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

/** The approval statements on `db` (the store's handle, or one of its transactions). */
export function approvalQueries(db: Kysely<GatewayDatabase>): ApprovalQueries {
  return {
    // Dated when it expired, not when that was noticed, so retention counts its age from then.
    async expire(timeoutMs, before) {
      await db
        .updateTable('approvals')
        .set({ status: 'expired', decided_at: sql<number>`created_at + ${timeoutMs}` })
        .where('status', '=', 'pending')
        .where('created_at', '<', before)
        .execute();
    },
    async find(session, kind, subject, hash, status) {
      const r = await db
        .selectFrom('approvals')
        .selectAll()
        .where('session_id', '=', session)
        .where('kind', '=', kind)
        .where('subject', '=', subject)
        .where('args_hash', '=', hash)
        .where('status', '=', status)
        .orderBy('created_at')
        .limit(1)
        .executeTakeFirst();
      return r && row(r);
    },
    async insert(r) {
      await db
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
        })
        .onConflict((oc) => oc.doNothing())
        .execute();
    },
    async spend(id) {
      const res = await db
        .updateTable('approvals')
        .set({ status: 'used' })
        .where('id', '=', id)
        .where('status', '=', 'approved')
        .executeTakeFirst();
      return Number(res.numUpdatedRows) > 0;
    },
    async get(id) {
      const r = await db.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst();
      return r && row(r);
    },
    async decide(status, at, by, reason, id) {
      const res = await db
        .updateTable('approvals')
        .set({ status, decided_at: at, decided_by: by, decision_reason: reason })
        .where('id', '=', id)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      return Number(res.numUpdatedRows);
    },
    // Decided, expired and used ones only: a pending approval is what a paused task waits for.
    async prune(before, limit) {
      const old = db
        .selectFrom('approvals')
        .select('id')
        .where('status', '!=', 'pending')
        .where((eb) => eb(eb.fn.coalesce('decided_at', 'created_at'), '<', before))
        .limit(limit);
      const res = await db.deleteFrom('approvals').where('id', 'in', old).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
    async list(f) {
      const rows = await db
        .selectFrom('approvals')
        .selectAll()
        .$if(f.status !== null, (q) => q.where('status', '=', f.status as string))
        .$if(f.session_id !== null, (q) => q.where('session_id', '=', f.session_id as string))
        .orderBy('created_at', 'desc')
        .limit(f.limit)
        .execute();
      return rows.map(row);
    },
    transaction: (work) => db.transaction().execute((trx) => work(approvalQueries(trx))),
  };
}
