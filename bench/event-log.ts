import { rmSync } from 'node:fs';
import path from 'node:path';
import { createTaskStore } from '../agent-server/store/store.ts';
import { openDatabase } from '../lib/db/sqlite.ts';

// Figure 10, event-log persistence: step records per second through the agent-server's task store
// (appendEvent as the loop records every step, then the store's group commit) against raw better-sqlite3 inserts of the same rows, each serialised as it is inserted, into a table
// like it on a database opened the same way (WAL, same pragmas). Raw inserts are timed two ways — one commit
// each, and the whole batch in one transaction as the store commits — and the faster is the baseline.

/** Records per second of both, measured in turns so a noisy moment hits both alike. */
export interface EventLogRun {
  storeRecordsPerS: number;
  /** The faster raw way. */
  rawInsertsPerS: number;
  /** One autocommitted INSERT each. */
  rawRunPerS: number;
  /** The batch in one transaction. */
  rawBatchedPerS: number;
  /** Records per commit, store and batched raw alike. */
  batch: number;
  recordBytes: number;
  records: number;
}

/** A step record as the loop writes one (a model_call event of a tool-calling step). */
export function stepData(i: number) {
  return {
    step: i,
    tools: ['manage_toolsets', 'read_text_file', 'list_directory', 'search_files'],
    content: null,
    tool_calls: [{ id: `call_${i}`, name: 'read_text_file' }],
    usage: { prompt_tokens: 1840 + i, completion_tokens: 31, total_tokens: 1871 + i },
    finish_reason: 'tool_calls',
    latency_ms: 812.4,
    attempts: 1,
    tool_tokens: 1411,
    message_tokens: 429 + i,
  };
}

/**
 * Runs it in `dir`: `rounds` rounds, each `batch` records one way then the other, alternating which goes
 * first (both share the database and its WAL, so a checkpoint lands in either).
 */
// The store's time is from the first append to its flush resolving (the batch committed), as PostgreSQL's is.
export async function eventLogRun(dir: string, rounds = 200, batch = 50): Promise<EventLogRun> {
  const file = path.join(dir, 'events.db');
  rmSync(file, { force: true });
  const db = openDatabase(file);
  db.exec(`CREATE TABLE raw_events (task_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
    at TEXT NOT NULL, duration_ms REAL, data TEXT NOT NULL, PRIMARY KEY (task_id, seq))`);
  const store = createTaskStore(db);
  const raw = db.prepare(
    'INSERT INTO raw_events (task_id, seq, type, at, duration_ms, data) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const rawTransaction = db.transaction((taskId: string, events: object[], at: string) => {
    for (const event of events) raw.run(taskId, ++seq, 'model_call', at, 812.4, JSON.stringify(event));
  });
  let storeMs = 0;
  let rawMs = 0;
  let batchedMs = 0;
  let seq = 0;
  const at = new Date().toISOString();
  const recordBytes = JSON.stringify(stepData(1)).length;
  for (let r = 0; r < rounds; r++) {
    const taskId = `task_${r}`;
    await store.createTask(taskId, `ses_${r}`, 'benchmark the event log');
    // The loop hands the store its event as an object; building it is the loop's work, not the store's.
    const events = Array.from({ length: batch }, (_, i) => stepData(i));
    const viaStore = async () => {
      const started = performance.now();
      for (const event of events) store.appendEvent(taskId, 'model_call', 812.4, event);
      await store.flush();
      storeMs += performance.now() - started;
    };
    // Raw: each row serialised and inserted — one autocommitted INSERT each, then the batch in one transaction.
    const viaRaw = () => {
      let started = performance.now();
      for (const event of events) raw.run(taskId, ++seq, 'model_call', at, 812.4, JSON.stringify(event));
      rawMs += performance.now() - started;
      started = performance.now();
      rawTransaction(taskId, events, at);
      batchedMs += performance.now() - started;
    };
    if (r % 2 === 0) {
      await viaStore();
      viaRaw();
    } else {
      viaRaw();
      await viaStore();
    }
  }
  await store.close();
  return { ...recordRates(rounds * batch, { storeMs, rawMs, batchedMs }), batch, recordBytes };
}

/** Records per second of the store and of the two raw ways, from the time each took for `records`. */
export function recordRates(records: number, ms: { storeMs: number; rawMs: number; batchedMs: number }) {
  const rawRunPerS = (records / ms.rawMs) * 1000;
  const rawBatchedPerS = (records / ms.batchedMs) * 1000;
  return {
    storeRecordsPerS: (records / ms.storeMs) * 1000,
    rawInsertsPerS: Math.max(rawRunPerS, rawBatchedPerS),
    rawRunPerS,
    rawBatchedPerS,
    records,
  };
}
