import { createWriteBatch, type Db, migrateSqlite } from '../../lib/sqlite.ts';
import type { EventType, Task, TaskEvent } from '../contract.ts';
import { type TaskOutcome, type TaskRow, type TaskStore, toTask } from './interface.ts';

export type { TaskOutcome, TaskStore };

// Tasks and their events in SQLite, the embedded default (postgres.ts is the same store on PostgreSQL).

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tasks (
  task_id TEXT PRIMARY KEY,
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
  finished_at TEXT
);
CREATE INDEX IF NOT EXISTS tasks_created ON tasks (created_at);
CREATE TABLE IF NOT EXISTS task_events (
  task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  at TEXT NOT NULL,
  duration_ms REAL,
  data TEXT NOT NULL,
  PRIMARY KEY (task_id, seq)
);
`;

/**
 * The schema's versions (lib/sqlite.ts migrateSqlite). A database made before migrations were recorded has
 * the tables and perhaps some of the columns: step 1 only creates what is missing, step 2 adds each column
 * it lacks.
 */
const MIGRATIONS = [
  SCHEMA,
  (db: Db) => {
    const have = new Set(
      db
        .prepare<[], { name: string }>("SELECT name FROM pragma_table_info('tasks')")
        .all()
        .map((c) => c.name),
    );
    // The token totals; what a paused task waits for and the loop state it resumes from (also after a restart).
    for (const column of ['tokens', 'pending_approval', 'resume_state'])
      if (!have.has(column)) db.exec(`ALTER TABLE tasks ADD COLUMN ${column} TEXT`);
  },
  // A queued task's request (steps, duration, exposure), to start it later, also after a restart.
  'ALTER TABLE tasks ADD COLUMN request TEXT',
];

/**
 * The SQLite task store: creates or migrates the tables and returns the task queries. Event records are
 * committed together a few milliseconds after they are written (lib/sqlite.ts createWriteBatch): a step's five
 * or six rows in one commit, every read flushing first, a failure given to `onWriteError`. A task's creation,
 * pause, resumption and end are committed at once and reject when they fail. Every method does its work in
 * the turn it is called in (the promises only carry the result).
 */
export function createTaskStore(
  db: Db,
  onWriteError: (err: unknown) => void = (err) => process.emitWarning(`task store write failed: ${err}`),
): TaskStore {
  migrateSqlite(db, 'agent-server', MIGRATIONS);
  const q = {
    insert: db.prepare(
      'INSERT INTO tasks (task_id, session_id, goal, status, created_at, request) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    start: db.prepare(
      "UPDATE tasks SET status = 'running', request = NULL WHERE task_id = ? AND status = 'queued'",
    ),
    queued: db.prepare<[], TaskRow>("SELECT * FROM tasks WHERE status = 'queued' ORDER BY created_at, rowid"),
    addEvent: db.prepare<[string, number, EventType, string, number | null, string]>(
      'INSERT INTO task_events (task_id, seq, type, at, duration_ms, data) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    lastSeq: db.prepare<[string], { seq: number | null }>(
      'SELECT MAX(seq) AS seq FROM task_events WHERE task_id = ?',
    ),
    finish: db.prepare(
      `UPDATE tasks SET status = ?, final_answer = ?, error = ?, steps = ?, usage = ?, toolsets_used = ?,
       tokens = ?, finished_at = ? WHERE task_id = ?`,
    ),
    get: db.prepare<[string], TaskRow>('SELECT * FROM tasks WHERE task_id = ?'),
    events: db.prepare<[string, number], Omit<TaskEvent, 'data'> & { data: string }>(
      'SELECT seq, type, at, duration_ms, data FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq',
    ),
    recent: db.prepare<[number], TaskRow>('SELECT * FROM tasks ORDER BY created_at DESC, rowid DESC LIMIT ?'),
    interrupt: db.prepare(
      "UPDATE tasks SET status = 'failed', error = ?, finished_at = ? WHERE status = 'running'",
    ),
    pause: db.prepare(
      "UPDATE tasks SET status = 'awaiting_approval', pending_approval = ?, resume_state = ? WHERE task_id = ?",
    ),
    unpause: db.prepare(
      "UPDATE tasks SET status = 'running', pending_approval = NULL, resume_state = NULL WHERE task_id = ? AND status = 'awaiting_approval'",
    ),
    awaiting: db.prepare<[], TaskRow>(
      "SELECT * FROM tasks WHERE status = 'awaiting_approval' ORDER BY created_at",
    ),
    clearPause: db.prepare('UPDATE tasks SET pending_approval = NULL, resume_state = NULL WHERE task_id = ?'),
    // Finished tasks only (running and paused ones are never deleted); their events go with them (CASCADE).
    prune: db.prepare(
      `DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks WHERE created_at < ?
       AND status NOT IN ('queued', 'running', 'awaiting_approval') AND finished_at < ? LIMIT ?)`,
    ),
  };
  const batch = createWriteBatch(db, onWriteError);
  const finish = db.transaction((taskId: string, o: TaskOutcome) => {
    q.clearPause.run(taskId);
    q.finish.run(
      o.status,
      o.final_answer,
      o.error,
      o.steps,
      JSON.stringify(o.usage),
      JSON.stringify(o.toolsets_used),
      JSON.stringify(o.tokens),
      new Date().toISOString(),
      taskId,
    );
  });
  /** The last seq given to each task this process has events for (read from the table on first use). */
  const lastSeq = new Map<string, number>();
  return {
    /** Records a new task, committed at once (a failure throws: the task must not run unrecorded). */
    async createTask(taskId: string, sessionId: string, goal: string, queued?: { request: unknown }) {
      const status = queued ? 'queued' : 'running';
      const request = queued ? JSON.stringify(queued.request) : null;
      q.insert.run(taskId, sessionId, goal, status, new Date().toISOString(), request);
      lastSeq.set(taskId, 0);
    },
    async startQueued(taskId: string) {
      batch.flush();
      return q.start.run(taskId).changes === 1;
    },
    async queued() {
      batch.flush();
      return q.queued.all().map((row) => ({
        task: toTask(row),
        request: row.request ? JSON.parse(row.request) : null,
      }));
    },
    appendEvent(
      taskId: string,
      type: EventType,
      durationMs: number | null,
      data: Record<string, unknown>,
    ): TaskEvent {
      const at = new Date().toISOString();
      let seq = lastSeq.get(taskId);
      if (seq === undefined) {
        batch.flush();
        seq = q.lastSeq.get(taskId)?.seq ?? 0;
      }
      seq += 1;
      lastSeq.set(taskId, seq);
      const text = JSON.stringify(data);
      batch.add(() => q.addEvent.run(taskId, seq, type, at, durationMs, text));
      // The emitter typed `data` by its `type` (Emit); stored rows are read back as what they were written as.
      return { seq, type, at, duration_ms: durationMs, data } as TaskEvent;
    },
    /**
     * Records that the task waits for `pending`, with the loop state to resume from: committed at once, after
     * the events queued before it (a failure throws: a pause nobody can find would never be decided).
     */
    async pause(taskId: string, pending: unknown, state: unknown) {
      batch.flush();
      q.pause.run(JSON.stringify(pending), JSON.stringify(state), taskId);
    },
    /** The task runs again (its approval was decided); committed at once, like the pause. */
    async unpause(taskId: string) {
      batch.flush();
      return q.unpause.run(taskId).changes === 1;
    },
    /** Tasks paused for an approval, with what they wait for and their saved loop state. */
    async awaiting(): Promise<{ task: Task; pending: unknown; state: unknown }[]> {
      batch.flush();
      return q.awaiting.all().map((row) => ({
        task: toTask(row),
        pending: row.pending_approval ? JSON.parse(row.pending_approval) : null,
        state: row.resume_state ? JSON.parse(row.resume_state) : null,
      }));
    },
    /** Stores how the task ended: committed at once, after the events queued before it (a failure throws). */
    async finishTask(taskId: string, o: TaskOutcome) {
      batch.flush();
      lastSeq.delete(taskId);
      finish(taskId, o);
    },
    async getTask(taskId: string): Promise<Task | undefined> {
      batch.flush();
      const row = q.get.get(taskId);
      return row ? toTask(row) : undefined;
    },
    /** The task's events in order; with `after`, only those whose seq is greater (for resuming a stream). */
    async events(taskId: string, after = 0): Promise<TaskEvent[]> {
      batch.flush();
      return q.events.all(taskId, after).map((e) => ({ ...e, data: JSON.parse(e.data) }));
    },
    async recentTasks(limit: number): Promise<Task[]> {
      batch.flush();
      return q.recent.all(limit).map(toTask);
    },
    /** Tasks a previous process left running cannot resume yet: mark them failed, saying why. */
    async failInterrupted(): Promise<number> {
      batch.flush();
      return q.interrupt.run('the agent-server stopped while this task was running', new Date().toISOString())
        .changes;
    },
    /** Retention (lib/retention.ts): deletes at most `limit` tasks finished before `before` (ISO), with their events. */
    async pruneTasks(before: string, limit: number): Promise<number> {
      batch.flush();
      return q.prune.run(before, before, limit).changes;
    },
    /** Commits the queued writes now (for a reader outside this store, such as another process). */
    flush: async () => batch.flush(),
    async close() {
      batch.flush();
      db.close();
    },
  };
}
