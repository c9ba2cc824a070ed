import type { Kysely } from 'kysely';
import { atomically, type DialectName } from '../../lib/db/kysely.ts';

// Migration 004: checkpoints that append (store/checkpoints.ts). A running task's checkpoint keeps its small state in
// `tasks.resume_state` and its conversation in parts: each part the messages one checkpoint added, from position
// `start` on; `tasks.checkpoint_messages` is how many messages the parts hold (an append must start there).
// A checkpoint written before (its conversation inside resume_state, the new column empty) reads as it was.

export function checkpointParts(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  return atomically(db, dialect, async () => {
    await db.schema
      .createTable('task_checkpoint_parts')
      .ifNotExists()
      .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.task_id').onDelete('cascade'))
      .addColumn('start', 'integer', (c) => c.notNull())
      .addColumn('data', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('task_checkpoint_parts_pkey', ['task_id', 'start'])
      .execute();
    await db.schema.alterTable('tasks').addColumn('checkpoint_messages', 'integer').execute();
  });
}
