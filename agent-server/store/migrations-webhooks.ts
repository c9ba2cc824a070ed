import type { Kysely } from 'kysely';

// Migration 003: tasks' webhook deliveries (store/webhooks.ts). A row per task and what happened (its end, a
// wait for a human), written with that happening; deleted with its task.

export async function webhookDeliveries(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_deliveries')
    .ifNotExists()
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('event_key', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_at', 'bigint', (c) => c.notNull())
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'bigint')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('delivered_at', 'text')
    // One delivery per task and happening: an end recorded twice (a takeover) yields one POST.
    .addUniqueConstraint('webhook_deliveries_task_event', ['task_id', 'event_key'])
    .execute();
  // The deliverers' claims: the pending ones by when they are due.
  await db.schema
    .createIndex('webhook_deliveries_due')
    .ifNotExists()
    .on('webhook_deliveries')
    .columns(['status', 'next_at'])
    .execute();
}
