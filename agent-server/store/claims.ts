import type { CallRecord, ClaimedTask, QueueChange, TaskRow } from './interface.ts';
import { toTask } from './interface.ts';

// Claims in one statement, as pg-boss takes jobs: the oldest queued rows a worker has slots for are moved to
// running under its lease and handed back with what each goes on from (its checkpoint, the last seq of its
// events, its call records), so a claimed task costs no other round trip; on PostgreSQL the same statement
// tells the other processes which tasks went (they drop them from their queues without reading anything).

/** The columns a claimed task is handed back with (its Task, its request and checkpoint, its fence). */
const CLAIMED =
  'task_id, session_id, goal, status, final_answer, error, steps, usage, toolsets_used, tokens, created_at, finished_at, pending_approval, resume_state, request, decision, fence';

/** Under PostgreSQL's 8,000-byte notification payload. */
const MAX_PAYLOAD = 7800;

/**
 * PostgreSQL: $1 how many, $2 this worker; `$UNTIL` its lease's end (the store's clock). Rows another worker is
 * claiming (locked) are skipped; the notification on `channel` names the claimed tasks and who claimed them.
 */
export function postgresClaimSql(channel: string): string {
  const t = CLAIMED.split(', ')
    .map((c) => `t.${c}`)
    .join(', ');
  return `WITH next AS (
      SELECT task_id FROM tasks WHERE status = 'queued' ORDER BY created_at, n LIMIT $1 FOR UPDATE SKIP LOCKED),
    claimed AS (
      UPDATE tasks t SET status = 'running', lease_owner = $2, lease_until = $UNTIL, fence = t.fence + 1
      FROM next WHERE t.task_id = next.task_id
      RETURNING ${t}, t.n,
        (SELECT MAX(e.seq) FROM task_events e WHERE e.task_id = t.task_id) AS last_seq,
        CASE WHEN t.fence > 1 THEN (SELECT json_agg(json_build_object('idx', c.idx, 'call_id', c.call_id,
          'finished', c.finished, 'result', c.result) ORDER BY c.idx) FROM task_calls c WHERE c.task_id = t.task_id)
        END AS calls),
    ids AS (SELECT string_agg(task_id, ',') AS list FROM claimed),
    sent AS (SELECT pg_notify('${channel}', 'claimed' || chr(9) || $2::text || chr(9) ||
      CASE WHEN length(list) <= ${MAX_PAYLOAD} THEN list ELSE '*' END) FROM ids WHERE list IS NOT NULL)
    SELECT claimed.* FROM claimed LEFT JOIN sent ON true ORDER BY created_at, n`;
}

/**
 * SQLite, inside its one writer's lock: @limit, @holder, @until. The call records are read apart (only for a
 * task that ran before), in the same process: no round trip.
 */
export const SQLITE_CLAIM_SQL = `UPDATE tasks SET status = 'running', lease_owner = @holder, lease_until = @until,
  fence = fence + 1 WHERE task_id IN (SELECT task_id FROM tasks WHERE status = 'queued'
  ORDER BY created_at, rowid LIMIT @limit)
  RETURNING ${CLAIMED}, rowid AS n, (SELECT MAX(e.seq) FROM task_events e WHERE e.task_id = tasks.task_id) AS last_seq`;

/** A claimed row as both statements return it. */
export type ClaimedRow = TaskRow & {
  n: number | string;
  last_seq: number | string | null;
  calls?: { idx: number; call_id: string; finished: boolean; result: string | null }[] | null;
};

/** Claimed rows, oldest first, as claims; `callsOf` gives the call records of a row that did not carry them. */
export function toClaimed(rows: ClaimedRow[], callsOf: (taskId: string) => CallRecord[]): ClaimedTask[] {
  const sorted = [...rows].sort(
    (a, b) => a.created_at.localeCompare(b.created_at) || Number(a.n) - Number(b.n),
  );
  return sorted.map(({ n: _n, last_seq: _l, calls, ...row }) => {
    const resumed = Number(row.fence) > 1;
    return {
      task: toTask(row),
      claim: {
        resumed,
        state: row.resume_state ? JSON.parse(row.resume_state) : null,
        request: row.request ? JSON.parse(row.request) : null,
        calls: !resumed
          ? []
          : calls === undefined
            ? callsOf(row.task_id)
            : (calls ?? []).map((c) => ({
                index: c.idx,
                call_id: c.call_id,
                finished: c.finished,
                result: c.result === null ? null : JSON.parse(c.result),
              })),
      },
    };
  });
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
