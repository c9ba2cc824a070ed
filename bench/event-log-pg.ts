import pg from 'pg';
import { createPostgresTaskStore } from '../agent-server/store/store.ts';
import { openPostgres } from '../lib/db/postgres.ts';
import { freshDatabase, startTestPostgres } from '../tests/helpers/postgres.ts';
import { recordRates, stepData } from './event-log.ts';

// Figure 10 on PostgreSQL: step records per second through the agent-server's PostgreSQL task store
// (appendEvent, then its write-behind: one multi-row INSERT per flush) against raw `pg` inserts of the same rows
// into a table like it, on a throwaway server started for the run (the test run's, tests/helpers/postgres.ts):
// one autocommitted INSERT per row, and the batch as one multi-row INSERT; the faster is the baseline. Rounds
// alternate which goes first.

export interface PgEventLogRun {
  storeRecordsPerS: number;
  rawInsertsPerS: number;
  rawRunPerS: number;
  rawBatchedPerS: number;
  batch: number;
  records: number;
  /** Why there are no figures (no PostgreSQL server binaries on this machine). */
  skipped?: string;
}

export async function pgEventLogRun(rounds = 100, batch = 50): Promise<PgEventLogRun> {
  let server: Awaited<ReturnType<typeof startTestPostgres>>;
  try {
    server = await startTestPostgres();
  } catch (err) {
    const empty = {
      storeRecordsPerS: 0,
      rawInsertsPerS: 0,
      rawRunPerS: 0,
      rawBatchedPerS: 0,
      batch,
      records: 0,
    };
    return { ...empty, skipped: (err as Error).message };
  }
  process.env.TOOLSHIFT_TEST_POSTGRES_URL = server.url;
  try {
    const url = await freshDatabase('bench');
    const store = await createPostgresTaskStore(openPostgres(url, 'bench', { max: 2 }));
    const raw = new pg.Client({ connectionString: url });
    await raw.connect();
    await raw.query(`CREATE TABLE raw_events (task_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
      at TEXT NOT NULL, duration_ms DOUBLE PRECISION, data TEXT NOT NULL, PRIMARY KEY (task_id, seq))`);
    let storeMs = 0;
    let rawMs = 0;
    let batchedMs = 0;
    let seq = 0;
    const at = new Date().toISOString();
    for (let r = 0; r < rounds; r++) {
      const taskId = `task_${r}`;
      await store.createTask(taskId, `ses_${r}`, 'benchmark the event log');
      const events = Array.from({ length: batch }, (_, i) => stepData(i));
      const viaStore = async () => {
        const started = performance.now();
        for (const event of events) store.appendEvent(taskId, 'model_call', 812.4, event);
        await store.flush();
        storeMs += performance.now() - started;
      };
      const viaRaw = async () => {
        let started = performance.now();
        for (const event of events) {
          await raw.query('INSERT INTO raw_events VALUES ($1, $2, $3, $4, $5, $6)', [
            taskId,
            ++seq,
            'model_call',
            at,
            812.4,
            JSON.stringify(event),
          ]);
        }
        rawMs += performance.now() - started;
        started = performance.now();
        const values: unknown[] = [];
        const rows = events.map((event, i) => {
          values.push(taskId, ++seq, 'model_call', at, 812.4, JSON.stringify(event));
          return `($${i * 6 + 1}, $${i * 6 + 2}, $${i * 6 + 3}, $${i * 6 + 4}, $${i * 6 + 5}, $${i * 6 + 6})`;
        });
        await raw.query(`INSERT INTO raw_events VALUES ${rows.join(', ')}`, values);
        batchedMs += performance.now() - started;
      };
      if (r % 2 === 0) {
        await viaStore();
        await viaRaw();
      } else {
        await viaRaw();
        await viaStore();
      }
    }
    await raw.end();
    await store.close();
    return { ...recordRates(rounds * batch, { storeMs, rawMs, batchedMs }), batch };
  } finally {
    server.stop();
  }
}
