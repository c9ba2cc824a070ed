import { type CompiledQuery, type SqlBool, sql } from 'kysely';
import type { WebhookDelivery } from '../contract.ts';
import type { DialectHooks, Kdb } from './dialect.ts';
import type { DueWebhook, TaskStore, WebhookToSend } from './interface.ts';
import type { Leases } from './leases.ts';

// Tasks' webhook deliveries: a row written in the same statement (PostgreSQL) or transaction (SQLite) as what it
// tells (the task's end, its pause), so a process killed right after that commits still delivers it once it is
// back, and one that never committed it sends nothing; unique per task and happening, so an end recorded twice
// yields one POST. Deliverers claim due rows one statement at a time under a short lease (one worker sends
// each; a worker that stops mid-POST lets its lease lapse and another sends it again, with the same id).

type WebhookMethods = Pick<
  TaskStore,
  'claimWebhooks' | 'webhookDelivered' | 'webhookRetry' | 'webhookDeliveries' | 'onWebhookDue'
>;

/** The parts the task writes use: the INSERT that goes with an end or a pause, and the wake-up after it. */
export interface WebhookParts {
  /** The delivery's INSERT, run only with the write it goes with (on PostgreSQL gated on that write's `w`). */
  insert(taskId: string, d: WebhookToSend): CompiledQuery;
  /** A delivery was written here: the deliverers of this process look now. */
  due(): void;
}

export function webhookParts(db: Kdb, hooks: DialectHooks, now: () => number) {
  const listeners = new Set<() => void>();
  const parts: WebhookParts = {
    insert: (taskId, d) =>
      db
        .insertInto('webhook_deliveries')
        .columns(['id', 'task_id', 'kind', 'event_key', 'url', 'payload', 'status', 'next_at', 'created_at'])
        .expression(
          db
            .selectNoFrom((eb) => [
              eb.val(d.id).as('id'),
              eb.val(taskId).as('task_id'),
              eb.val(d.kind).as('kind'),
              eb.val(d.key).as('event_key'),
              eb.val(d.url).as('url'),
              eb.val(d.payload).as('payload'),
              eb.val('pending').as('status'),
              sql<number>`CAST(${now()} AS bigint)`.as('next_at'),
              eb.val(new Date().toISOString()).as('created_at'),
            ])
            // PostgreSQL: only when the write (CTE `w`, dialect.ts oneWriteSql) changed the task's row. SQLite
            // runs it after that write in its transaction, and an INSERT … SELECT with an upsert needs a WHERE.
            .where(hooks.oneWrite ? sql<SqlBool>`EXISTS (SELECT 1 FROM w)` : sql<SqlBool>`1 = 1`),
        )
        .onConflict((oc) => oc.columns(['task_id', 'event_key']).doNothing())
        .compile(),
    due: () => {
      for (const l of [...listeners]) l();
    },
  };
  return { parts, listeners };
}

export function webhookMethods(
  db: Kdb,
  hooks: DialectHooks,
  leases: Leases,
  listeners: Set<() => void>,
): WebhookMethods {
  return {
    // One statement: of several workers claiming at once, each row goes to one (SKIP LOCKED on PostgreSQL,
    // SQLite's one writer), and a row under another worker's unexpired lease is not taken.
    async claimWebhooks(limit, leaseMs) {
      const now = leases.now();
      const rows = await db
        .updateTable('webhook_deliveries')
        .set({
          lease_owner: leases.holder,
          lease_until: now + leaseMs,
          attempts: sql<number>`attempts + 1`,
        })
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('webhook_deliveries as d')
            .select('d.id')
            .where('d.status', '=', 'pending')
            .where('d.next_at', '<=', now)
            .where((w) => w.or([w('d.lease_until', 'is', null), w('d.lease_until', '<=', now)]))
            .orderBy('d.next_at')
            .limit(limit)
            .$if(hooks.skipLocked, (q) => q.forUpdate().skipLocked()),
        )
        .returning(['id', 'task_id', 'kind', 'url', 'payload', 'attempts', 'created_at'])
        .execute();
      return rows.map((r): DueWebhook => ({ ...r, attempts: Number(r.attempts) }));
    },
    async webhookDelivered(id) {
      await db
        .updateTable('webhook_deliveries')
        .set({
          status: 'delivered',
          delivered_at: new Date().toISOString(),
          last_error: null,
          lease_owner: null,
          lease_until: null,
        })
        .where('id', '=', id)
        .execute();
    },
    async webhookRetry(id, error, nextAt) {
      await db
        .updateTable('webhook_deliveries')
        .set({
          ...(nextAt === undefined ? { status: 'failed' as const } : { next_at: nextAt }),
          last_error: error,
          lease_owner: null,
          lease_until: null,
        })
        .where('id', '=', id)
        .where('status', '=', 'pending')
        // Not once another worker claimed it again (this claim lapsed): its attempt is the one that counts.
        .where('lease_owner', '=', leases.holder)
        .execute();
    },
    async webhookDeliveries(taskId) {
      const rows = await db
        .selectFrom('webhook_deliveries')
        .select(['id', 'kind', 'status', 'attempts', 'last_error', 'created_at', 'delivered_at'])
        .where('task_id', '=', taskId)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      return rows.map((r): WebhookDelivery => ({ ...r, attempts: Number(r.attempts) }));
    },
    onWebhookDue(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
