import { inTransaction, migratePostgres, type Pool } from '../../lib/postgres.ts';
import type { EventType, Task, TaskEvent } from '../contract.ts';
import type { TaskOutcome, TaskRow, TaskStore } from './interface.ts';
import { toTask } from './interface.ts';

// Tasks and their events in PostgreSQL (DATABASE_URL): the same store as store.ts's SQLite one, the same
// contract suite (tests/agent-server/store/contract.test.ts). Events are numbered when they are appended and
// written behind in one multi-row INSERT a few milliseconds later (or before any read, pause or end); a task's
// last events and its end are committed in one transaction.

const MIGRATIONS = [
  `CREATE TABLE tasks (
     task_id TEXT PRIMARY KEY,
     n BIGINT GENERATED ALWAYS AS IDENTITY,
     session_id TEXT NOT NULL,
     goal TEXT NOT NULL,
     status TEXT NOT NULL,
     final_answer TEXT,
     error TEXT,
     steps INTEGER NOT NULL DEFAULT 0,
     usage TEXT NOT NULL DEFAULT '{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}',
     toolsets_used TEXT NOT NULL DEFAULT '[]',
     tokens TEXT,
     created_at TEXT NOT NULL,
     finished_at TEXT,
     pending_approval TEXT,
     resume_state TEXT
   );
   CREATE INDEX tasks_created ON tasks (created_at);
   CREATE INDEX tasks_status ON tasks (status);
   CREATE TABLE task_events (
     task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
     seq INTEGER NOT NULL,
     type TEXT NOT NULL,
     at TEXT NOT NULL,
     duration_ms DOUBLE PRECISION,
     data TEXT NOT NULL,
     PRIMARY KEY (task_id, seq)
   );`,
  // A queued task's request (steps, duration, exposure), to start it later, also after a restart.
  'ALTER TABLE tasks ADD COLUMN request TEXT',
];

/** How long an appended event may wait for others to share its INSERT. */
const WRITE_BEHIND_MS = 5;
/** The most rows one INSERT carries (six parameters each, under PostgreSQL's 65,535). */
const MAX_ROWS_PER_INSERT = 1000;

type Row = [string, number, EventType, string, number | null, string];

const COLUMNS =
  'task_id, session_id, goal, status, final_answer, error, steps, usage, toolsets_used, tokens, created_at, finished_at, pending_approval, resume_state, request';

/** The PostgreSQL task store on `pool`, its schema migrated first. */
export async function createPostgresTaskStore(
  pool: Pool,
  onWriteError: (err: unknown) => void = (err) => process.emitWarning(`task store write failed: ${err}`),
): Promise<TaskStore> {
  await migratePostgres(pool, 'agent-server', MIGRATIONS);
  /** The last seq given to each task this store appends to. */
  const lastSeq = new Map<string, number>();
  let pending: Row[] = [];
  let timer: NodeJS.Timeout | null = null;
  /** Writes run one after another, in the order they were queued. */
  let writing: Promise<void> = Promise.resolve();

  const insertEvents = async (query: (sql: string, values: unknown[]) => Promise<unknown>, rows: Row[]) => {
    for (let i = 0; i < rows.length; i += MAX_ROWS_PER_INSERT) {
      const chunk = rows.slice(i, i + MAX_ROWS_PER_INSERT);
      const values = chunk.map(
        (_, r) =>
          `($${r * 6 + 1}, $${r * 6 + 2}, $${r * 6 + 3}, $${r * 6 + 4}, $${r * 6 + 5}, $${r * 6 + 6})`,
      );
      await query(
        `INSERT INTO task_events (task_id, seq, type, at, duration_ms, data) VALUES ${values.join(', ')}`,
        chunk.flat(),
      );
    }
  };
  /** Queues `work` after the writes before it, with the events appended so far; `work` gets them. */
  const enqueue = <T>(work: (rows: Row[]) => Promise<T>): Promise<T> => {
    if (timer) clearTimeout(timer);
    timer = null;
    const rows = pending;
    pending = [];
    const result = writing.then(() => work(rows));
    writing = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  };
  const flush = () =>
    enqueue(async (rows) => {
      if (rows.length === 0) return;
      try {
        await insertEvents((sql, values) => pool.query(sql, values), rows);
      } catch (err) {
        onWriteError(err);
      }
    });
  /**
   * One statement, committed with the events appended before it (in one transaction, after the writes queued
   * before it); resolves to the rows it changed.
   */
  const afterEvents = (sql: string, values: unknown[]): Promise<number> =>
    enqueue((rows) =>
      inTransaction(pool, async (client) => {
        await insertEvents((text, params) => client.query(text, params), rows);
        return (await client.query(sql, values)).rowCount ?? 0;
      }),
    );
  /** Tasks in `status`, oldest first, each with its last seq (their numbering goes on here, whoever began it). */
  const tasksIn = async (status: 'queued' | 'awaiting_approval') => {
    const rows = await read<TaskRow & { last_seq: number | null }>(
      `SELECT ${COLUMNS}, (SELECT MAX(seq) FROM task_events e WHERE e.task_id = t.task_id) AS last_seq
       FROM tasks t WHERE status = $1 ORDER BY created_at, n`,
      [status],
    );
    return rows.map(({ last_seq, ...row }) => {
      if (!lastSeq.has(row.task_id)) lastSeq.set(row.task_id, last_seq ?? 0);
      return row;
    });
  };
  const read = async <T>(sql: string, values: unknown[]): Promise<T[]> => {
    await flush();
    return (await pool.query(sql, values)).rows as T[];
  };

  return {
    async createTask(taskId, sessionId, goal, queued) {
      lastSeq.set(taskId, 0);
      // Committed at once (a failure rejects: the task must not run unrecorded), with other tasks' queued events.
      await afterEvents(
        'INSERT INTO tasks (task_id, session_id, goal, status, created_at, request) VALUES ($1, $2, $3, $4, $5, $6)',
        [
          taskId,
          sessionId,
          goal,
          queued ? 'queued' : 'running',
          new Date().toISOString(),
          queued ? JSON.stringify(queued.request) : null,
        ],
      );
    },
    appendEvent(taskId, type, durationMs, data): TaskEvent {
      const last = lastSeq.get(taskId);
      if (last === undefined) {
        throw new Error(
          `task ${taskId} was not created or found awaiting through this store: its events cannot be numbered`,
        );
      }
      const seq = last + 1;
      lastSeq.set(taskId, seq);
      const at = new Date().toISOString();
      pending.push([taskId, seq, type, at, durationMs, JSON.stringify(data)]);
      timer ??= setTimeout(() => void flush(), WRITE_BEHIND_MS);
      return { seq, type, at, duration_ms: durationMs, data } as TaskEvent;
    },
    // Only while still queued: of several processes claiming it, one gets the row.
    startQueued: async (taskId) =>
      (await afterEvents(
        "UPDATE tasks SET status = 'running', request = NULL WHERE task_id = $1 AND status = 'queued'",
        [taskId],
      )) === 1,
    async queued() {
      return (await tasksIn('queued')).map((row) => ({
        task: toTask(row),
        request: row.request ? JSON.parse(row.request) : null,
      }));
    },
    async pause(taskId, pendingApproval, state) {
      await afterEvents(
        "UPDATE tasks SET status = 'awaiting_approval', pending_approval = $1, resume_state = $2 WHERE task_id = $3",
        [JSON.stringify(pendingApproval), JSON.stringify(state), taskId],
      );
    },
    // Only while still paused: of several processes resuming it, one goes on.
    unpause: async (taskId) =>
      (await afterEvents(
        "UPDATE tasks SET status = 'running', pending_approval = NULL, resume_state = NULL WHERE task_id = $1 AND status = 'awaiting_approval'",
        [taskId],
      )) === 1,
    async awaiting() {
      return (await tasksIn('awaiting_approval')).map((row) => ({
        task: toTask(row),
        pending: row.pending_approval ? JSON.parse(row.pending_approval) : null,
        state: row.resume_state ? JSON.parse(row.resume_state) : null,
      }));
    },
    async finishTask(taskId, o: TaskOutcome) {
      lastSeq.delete(taskId);
      await afterEvents(
        `UPDATE tasks SET status = $1, final_answer = $2, error = $3, steps = $4, usage = $5, toolsets_used = $6,
         tokens = $7, finished_at = $8, pending_approval = NULL, resume_state = NULL WHERE task_id = $9`,
        [
          o.status,
          o.final_answer,
          o.error,
          o.steps,
          JSON.stringify(o.usage),
          JSON.stringify(o.toolsets_used),
          JSON.stringify(o.tokens),
          new Date().toISOString(),
          taskId,
        ],
      );
    },
    async getTask(taskId): Promise<Task | undefined> {
      const [row] = await read<TaskRow>(`SELECT ${COLUMNS} FROM tasks WHERE task_id = $1`, [taskId]);
      return row ? toTask(row) : undefined;
    },
    async events(taskId, after = 0) {
      const rows = await read<Omit<TaskEvent, 'data'> & { data: string }>(
        'SELECT seq, type, at, duration_ms, data FROM task_events WHERE task_id = $1 AND seq > $2 ORDER BY seq',
        [taskId, after],
      );
      return rows.map((e) => ({ ...e, data: JSON.parse(e.data) }) as TaskEvent);
    },
    async recentTasks(limit) {
      const rows = await read<TaskRow>(
        `SELECT ${COLUMNS} FROM tasks ORDER BY created_at DESC, n DESC LIMIT $1`,
        [limit],
      );
      return rows.map(toTask);
    },
    async failInterrupted() {
      await flush();
      const res = await pool.query(
        "UPDATE tasks SET status = 'failed', error = $1, finished_at = $2 WHERE status = 'running'",
        ['the agent-server stopped while this task was running', new Date().toISOString()],
      );
      return res.rowCount ?? 0;
    },
    async pruneTasks(before, limit) {
      await flush();
      const res = await pool.query(
        `DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE created_at < $1
         AND status NOT IN ('queued', 'running', 'awaiting_approval') AND finished_at < $1 LIMIT $2)`,
        [before, limit],
      );
      return res.rowCount ?? 0;
    },
    flush,
    async close() {
      await flush();
      await pool.end();
    },
  };
}
