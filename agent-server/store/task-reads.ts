import type { ExpressionBuilder } from 'kysely';
import type { Task } from '../contract.ts';
import { type StoreContext, TASK_COLUMNS } from './context.ts';
import { likePattern, type TaskFilter, type TaskRow, type TaskStore, toTask } from './interface.ts';
import type { AgentDatabase } from './schema.ts';

// Tasks' rows as clients read them: one task (after its own writes), the newest ones with a filter, counts.

type TaskReads = Pick<TaskStore, 'getTask' | 'recentTasks' | 'countTasks'>;

export function taskReads(c: StoreContext): TaskReads {
  const { db, writes } = c;
  /** Tasks, once every write in flight settled (their events need not be in). */
  const listed = () => c.guard(writes.settleAll());
  return {
    async getTask(taskId): Promise<Task | undefined> {
      await c.guard(writes.settle(taskId));
      const row = await db
        .selectFrom('tasks')
        .select(TASK_COLUMNS)
        .where('task_id', '=', taskId)
        .executeTakeFirst();
      return row ? toTask(row as TaskRow) : undefined;
    },
    async recentTasks(limit, filter: TaskFilter = {}) {
      await listed();
      const rows = await db
        .selectFrom('tasks')
        .select(TASK_COLUMNS)
        .$if(!!filter.status, (q) => q.where('status', '=', filter.status as Task['status']))
        .$if(!!filter.goal, (q) => q.where(c.hooks.goalLike(likePattern(filter.goal as string))))
        .$if(filter.owner !== undefined, (q) => q.where((eb) => ownedBy(eb, filter.owner as string)))
        .$if(!!filter.after, (q) =>
          q.where(
            (eb) => eb.refTuple('created_at', 'n'),
            '<',
            (eb) =>
              eb
                .selectFrom('tasks as a')
                .select(['a.created_at', 'a.n'])
                .where('a.task_id', '=', filter.after as string) as never,
          ),
        )
        .orderBy('created_at', 'desc')
        .orderBy('n', 'desc')
        .limit(limit)
        .execute();
      return rows.map((r) => toTask(r as TaskRow));
    },
    async countTasks(owner) {
      await listed();
      const rows = await db
        .selectFrom('tasks')
        .select(['status', (eb) => eb.fn.countAll<number | string>().as('n')])
        .$if(owner !== undefined, (q) => q.where((eb) => ownedBy(eb, owner as string)))
        .groupBy('status')
        .execute();
      return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    },
  };
}

/**
 * Tasks of `owner`'s threads; for a token's owner also those recorded before threads (whose owner no one
 * knows), never for a user's (`user:<id>`): a person sees only what is theirs.
 */
function ownedBy(eb: ExpressionBuilder<AgentDatabase, 'tasks'>, owner: string) {
  const theirs = eb(
    'thread_id',
    'in',
    eb.selectFrom('threads').select('threads.thread_id').where('owner', '=', owner),
  );
  return owner.startsWith('user:') ? theirs : eb.or([eb('thread_id', 'is', null), theirs]);
}
