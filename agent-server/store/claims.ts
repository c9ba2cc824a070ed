import { type Expression, type SqlBool, sql } from 'kysely';
import { partsOf, rebuiltState } from './checkpoints.ts';
import { ACTIVE, parsed, type StoreContext, TASK_COLUMNS } from './context.ts';
import type { Kdb } from './dialect.ts';
import type { CallRecord, ClaimedTask, QueueChange, TaskRow, TaskStore } from './interface.ts';
import { toTask } from './interface.ts';

// Claims in one statement, as pg-boss takes jobs: the oldest queued rows a worker has slots for are moved to
// running under its lease and handed back with what each goes on from (its checkpoint, the conversation put
// together from its parts, the last seq of its events, its call records), so a claimed task costs no other
// round trip; on PostgreSQL the same statement tells the other processes which tasks went (they drop them from
// their queues without reading anything).

/** Under PostgreSQL's 8,000-byte notification payload. */
const MAX_PAYLOAD = 7800;

/** A claimed row: the task's, its insertion number, its last seq, and its call records (JSON, as aggregated). */
type ClaimedRow = TaskRow & {
  n: number | string;
  last_seq: number | string | null;
  calls: unknown;
  checkpoint_messages: number | null;
  parts: unknown;
};

/** Which queued tasks a claim takes: the oldest `limit` but those in `skip`, or one by id. */
type Which = { limit: number; skip: readonly string[] } | { taskId: string };

/**
 * Moves the queued tasks `which` picks (the oldest `limit`, or one by id) to running under this worker's lease,
 * and hands back their rows with what each goes on from. Rows another worker is claiming (locked) are skipped.
 */
function claimUpdate(c: StoreContext, on: Kdb, which: Which) {
  const { leases, hooks } = c;
  return on
    .updateTable('tasks')
    .set({
      status: 'running',
      lease_owner: leases.holder,
      lease_until: leases.now() + leases.leaseMs,
      fence: sql<number>`fence + 1`,
    })
    .where('task_id', 'in', (eb) =>
      eb
        .selectFrom('tasks as q')
        .select('q.task_id')
        .where('q.status', '=', 'queued')
        .$if('taskId' in which, (q) => q.where('q.task_id', '=', (which as { taskId: string }).taskId))
        .$if('limit' in which && which.skip.length > 0, (q) =>
          q.where('q.task_id', 'not in', (which as { skip: readonly string[] }).skip),
        )
        // A thread's turns run one at a time, in order: not while an earlier one has not ended (a cancel
        // claims a waiting turn by id all the same).
        .$if('limit' in which, (q) =>
          q.where(({ not, exists, selectFrom }) =>
            not(
              exists(
                selectFrom('tasks as t')
                  .select('t.task_id')
                  .whereRef('t.thread_id', '=', 'q.thread_id')
                  .whereRef('t.n', '<', 'q.n')
                  .where('t.status', 'in', ACTIVE),
              ),
            ),
          ),
        )
        .orderBy('q.created_at')
        .orderBy('q.n')
        .limit('limit' in which ? which.limit : 1)
        .$if(hooks.skipLocked, (q) => q.forUpdate().skipLocked()),
    )
    .returning([
      ...TASK_COLUMNS,
      'n',
      (eb) =>
        eb
          .selectFrom('task_events as e')
          .select((s) => s.fn.max('e.seq').as('m'))
          .whereRef('e.task_id', '=', 'tasks.task_id')
          .as('last_seq'),
      // Only a task that ran before has call records to go on from.
      (eb) =>
        eb
          .case()
          .when(sql<SqlBool>`tasks.fence > 1`)
          .then(hooks.callsOf(sql.ref('tasks.task_id') as Expression<string>))
          .end()
          .as('calls'),
      'checkpoint_messages',
      (eb) =>
        eb
          .case()
          .when(sql<SqlBool>`tasks.fence > 1 AND tasks.checkpoint_messages IS NOT NULL`)
          .then(partsOf(hooks.name, sql.ref('tasks.task_id') as Expression<string>))
          .end()
          .as('parts'),
    ]);
}

/** Claimed rows, oldest first, as claims. */
function toClaimed(rows: ClaimedRow[]): ClaimedTask[] {
  const sorted = [...rows].sort(
    (a, b) => a.created_at.localeCompare(b.created_at) || Number(a.n) - Number(b.n),
  );
  return sorted.map(({ n: _n, last_seq: _l, calls, checkpoint_messages: count, parts, ...row }) => {
    const resumed = Number(row.fence) > 1;
    const checkpoint = rebuiltState(row.task_id, parsed(row.resume_state), count, parts);
    const records = (typeof calls === 'string' ? JSON.parse(calls) : (calls ?? [])) as {
      idx: number;
      call_id: string;
      finished: number;
      result: string | null;
    }[];
    return {
      task: toTask(row),
      claim: {
        resumed,
        state: checkpoint.state,
        ...(checkpoint.unreadable ? { unreadable: checkpoint.unreadable } : {}),
        request: parsed(row.request),
        calls: records
          .sort((a, b) => a.idx - b.idx)
          .map(
            (r): CallRecord => ({
              index: r.idx,
              call_id: r.call_id,
              finished: Number(r.finished) === 1,
              result: parsed(r.result),
            }),
          ),
      },
    };
  });
}

export function claimMethods(c: StoreContext): Pick<TaskStore, 'claim' | 'claimNext'> {
  /** Claims what `which` picks in one statement (announced to the other processes in it); its claims. */
  const claimed = async (which: Which) => {
    const rows = (await c.hooks.announceClaims(
      c.db,
      claimUpdate(c, c.db, which),
      c.leases.holder,
    )) as ClaimedRow[];
    const claims = toClaimed(rows);
    // Claimed under its fence: its numbering goes on after its last event, whoever wrote it.
    for (const row of rows) {
      c.leases.take(row.task_id, Number(row.fence));
      c.lastSeq.set(row.task_id, Number(row.last_seq ?? 0));
    }
    return claims;
  };
  return {
    // Only while still queued: of several workers claiming it, one gets the row (the others skip it at once).
    async claim(taskId) {
      await c.guard(c.writes.settle(taskId));
      const [one] = await claimed({ taskId });
      return one?.claim;
    },
    async claimNext(limit, skip = []) {
      if (limit <= 0) return [];
      return claimed({ limit, skip });
    },
  };
}

/** The queue channel's payload saying that `holder` claimed `ids` (`*`: too many to name). */
export function claimedPayload(holder: string, ids: string[]): string {
  const list = ids.join(',');
  return `claimed\t${holder}\t${list.length <= MAX_PAYLOAD ? list : '*'}`;
}

/** The payload saying tasks were queued (or requeued). */
export const QUEUED_PAYLOAD = 'queued';

/** What a queue notification says, or undefined for this worker's own claims (it knows of them). */
export function parseQueueChange(payload: string, holder: string): QueueChange | undefined {
  if (payload === QUEUED_PAYLOAD) return { kind: 'queued' };
  if (payload.startsWith('claimed\t')) {
    const [, by, list = ''] = payload.split('\t');
    if (by === holder) return undefined;
    return { kind: 'claimed', taskIds: list === '*' ? '*' : list.split(',').filter(Boolean) };
  }
  return { kind: 'any' };
}
