import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { LoopSnapshot } from '../agent-server/loop/state.ts';
import type { TaskStore } from '../agent-server/store/interface.ts';
import { createPostgresTaskStore, createTaskStore } from '../agent-server/store/store.ts';
import { checkpointOf, checkpointWriter } from '../agent-server/tasks/checkpoint.ts';
import { openPostgres } from '../lib/db/postgres.ts';
import { openDatabase } from '../lib/db/sqlite.ts';
import { freshDatabase, startTestPostgres } from '../tests/helpers/postgres.ts';
import { f2, n0 } from './format.ts';

// Figure 21, what a running task's checkpoints write: a 20-step task (a tool call and its result each step, the
// results 1–3 KB, a dozen tools offered) checkpointed before each step's call runs, through the task store on
// SQLite and on PostgreSQL. Before: each checkpoint the whole loop state with its conversation (the design up to
// migration 003, still what the store writes for a checkpoint without a part). After: its small state and the
// messages the step added (store/checkpoints.ts). The bytes are read back from the rows each checkpoint wrote
// (the task's resume_state, the part it added), summed over the task, and set against the final conversation's
// size (its messages as JSON).

/** A line of the summary (goals.ts's Goal). */
interface Goal {
  figure: string;
  measured: string;
  goal: string;
  met: boolean | null;
}

/** Steps of the task. */
const STEPS = 20;
/** The goal: checkpoints write at most this many times the final conversation. */
export const CHECKPOINT_GOAL = 3;

export interface CheckpointArm {
  database: 'SQLite' | 'PostgreSQL';
  /** Bytes the task's checkpoints wrote, whole (before) and appended (after). */
  beforeBytes: number;
  afterBytes: number;
  /** The parts in the rows before the task's end, and after it. */
  parts: number;
  partsAfterEnd: number;
  /** Whether a claim of the appended checkpoint gave back the whole checkpoint's state. */
  sameOnClaim: boolean;
}

export interface CheckpointsRun {
  steps: number;
  conversationBytes: number;
  arms: CheckpointArm[];
  skipped?: string;
}

/** A tool result of about `bytes` (a listing, as file and search tools answer). */
function result(step: number, bytes: number): string {
  const lines: string[] = [];
  for (let i = 0; lines.join('\n').length < bytes; i++)
    lines.push(`src/module_${step}/file_${i}.ts: line ${i * 7}`);
  return JSON.stringify({ step, matches: lines });
}

/** The task's loop state at `step` (the reply with its call appended, its result not yet). */
function snapshotAt(messages: ChatCompletionMessageParam[], step: number): LoopSnapshot {
  const call = {
    id: `call_${step}`,
    type: 'function' as const,
    function: { name: 'search', arguments: `{"q":"s${step}"}` },
  };
  messages.push({ role: 'assistant', content: null, tool_calls: [call] });
  const tools = Array.from({ length: 12 }, (_, i) => ({
    name: `tool_${i}`,
    toolset: 'files',
    description: 'a tool '.repeat(20),
    parameters: { type: 'object', properties: { q: { type: 'string' } } },
    annotations: { readOnlyHint: true },
  }));
  return {
    messages,
    steps: step,
    usage: { prompt_tokens: 900 * step, completion_tokens: 40 * step, total_tokens: 940 * step },
    tokens: {
      tokenizer: 'o200k_base',
      requests: step,
      tool_definition_tokens: 1200 * step,
      all_toolsets_tool_tokens: 9000,
      all_toolsets_not_counted: [],
      message_tokens: 700 * step,
    },
    used: ['files'],
    exposure: 'native',
    shown: [],
    turnStart: 1,
    context: {},
    pending: { step, calls: [call], index: 0, done: [], tools: tools as never },
  };
}

/** Reads what the rows of `taskId` hold: its resume_state's length, and its parts' (start, length). */
type Rows = (taskId: string) => Promise<{ state: number; parts: { start: number; bytes: number }[] }>;

async function arm(database: CheckpointArm['database'], store: TaskStore, rows: Rows) {
  try {
    const run = async (taskId: string, appended: boolean) => {
      await store.createTask(taskId, 'ses', 'twenty steps');
      const writer = checkpointWriter(store, taskId, () => undefined);
      const messages: ChatCompletionMessageParam[] = [
        { role: 'system', content: 'You are toolshift, an agent. '.repeat(60) },
        { role: 'user', content: 'Find where the configuration is read and list every setting.' },
      ];
      let bytes = 0;
      for (let step = 1; step <= STEPS; step++) {
        const snapshot = snapshotAt(messages, step);
        if (appended) await writer.write(snapshot);
        else await store.checkpoint(taskId, checkpointOf(snapshot), step);
        await store.callStarted(taskId, 0, `call_${step}`);
        const now = await rows(taskId);
        bytes += now.state + (appended ? (now.parts.at(-1)?.bytes ?? 0) : 0);
        const content = result(step, 1000 + ((step * 617) % 2000));
        messages.push({ role: 'tool', tool_call_id: `call_${step}`, content });
      }
      return { bytes, messages };
    };
    const before = await run('task_whole', false);
    const after = await run('task_parts', true);
    const parts = (await rows('task_parts')).parts.length;
    await store.release('task_parts');
    const claim = await store.claim('task_parts');
    await store.finishTask('task_parts', {
      status: 'completed',
      final_answer: 'done',
      error: null,
      steps: STEPS,
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      toolsets_used: [],
      tokens: {} as never,
    });
    after.messages.push({ role: 'assistant', content: 'The settings are read in lib/config.' });
    return {
      conversation: JSON.stringify(after.messages).length,
      arm: {
        database,
        beforeBytes: before.bytes,
        afterBytes: after.bytes,
        parts,
        partsAfterEnd: (await rows('task_parts')).parts.length,
        sameOnClaim: sameState(claim?.state, after.messages),
      },
    };
  } finally {
    await store.close();
  }
}

/** Whether a claimed state holds the conversation as of the last checkpoint (the run's, less its last result). */
function sameState(state: unknown, messages: ChatCompletionMessageParam[]): boolean {
  const held = (state as { messages?: unknown[] } | undefined)?.messages;
  return JSON.stringify(held) === JSON.stringify(messages.slice(0, -2));
}

export async function checkpointsRun(): Promise<CheckpointsRun> {
  const arms: CheckpointArm[] = [];
  let conversationBytes = 0;
  const dir = await mkdtemp(path.join(tmpdir(), 'bench-checkpoints-'));
  try {
    const file = path.join(dir, 'agent.db');
    // The store first (it makes the file), then a reader of its rows.
    const store = createTaskStore(openDatabase(file));
    const db = new Database(file, { readonly: true, fileMustExist: false });
    const rows: Rows = async (taskId) => ({
      state: (
        db.prepare('SELECT length(resume_state) AS n FROM tasks WHERE task_id = ?').get(taskId) as {
          n: number;
        }
      ).n,
      parts: db
        .prepare(
          'SELECT start, length(data) AS bytes FROM task_checkpoint_parts WHERE task_id = ? ORDER BY start',
        )
        .all(taskId) as { start: number; bytes: number }[],
    });
    const r = await arm('SQLite', store, rows);
    db.close();
    conversationBytes = r.conversation;
    arms.push(r.arm);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  let skipped: string | undefined;
  try {
    const server = await startTestPostgres();
    process.env.TOOLSHIFT_TEST_POSTGRES_URL = server.url;
    try {
      const url = await freshDatabase('checkpoints');
      const store = await createPostgresTaskStore(openPostgres(url, 'bench', { max: 4 }));
      const pool = openPostgres(url, 'bench', { max: 1 });
      const rows: Rows = async (taskId) => ({
        state: Number(
          (await pool.query('SELECT length(resume_state) AS n FROM tasks WHERE task_id = $1', [taskId]))
            .rows[0].n,
        ),
        parts: (
          await pool.query(
            'SELECT start, length(data) AS bytes FROM task_checkpoint_parts WHERE task_id = $1 ORDER BY start',
            [taskId],
          )
        ).rows.map((p) => ({ start: Number(p.start), bytes: Number(p.bytes) })),
      });
      const r = await arm('PostgreSQL', store, rows);
      await pool.end();
      arms.push(r.arm);
    } finally {
      await server.stop();
    }
  } catch (err) {
    skipped = (err as Error).message;
  }
  return { steps: STEPS, conversationBytes, arms, ...(skipped ? { skipped } : {}) };
}

/** Figure 21's line: the largest ratio of the databases measured, after against the goal (before with it). */
export function checkpointsGoals(r: CheckpointsRun): Goal[] {
  if (r.arms.length === 0) return [];
  const worst = r.arms.reduce((a, b) => (b.afterBytes > a.afterBytes ? b : a));
  const after = worst.afterBytes / r.conversationBytes;
  const before = worst.beforeBytes / r.conversationBytes;
  return [
    {
      figure: `21. Bytes written by checkpoints per ${r.steps}-step task / the final conversation (${worst.database})`,
      measured: `${f2(after)}× (whole checkpoints: ${f2(before)}×; ${n0(worst.afterBytes)} vs ${n0(worst.beforeBytes)} of ${n0(r.conversationBytes)} bytes)`,
      goal: `≤ ${CHECKPOINT_GOAL}×`,
      met: after <= CHECKPOINT_GOAL && r.arms.every((a) => a.sameOnClaim && a.partsAfterEnd === 0),
    },
  ];
}

/** Figure 21's section of BENCHMARKS.md. */
export function checkpointsSection(r: CheckpointsRun): string[] {
  return [
    '## 21. Checkpoints that append',
    '',
    `A ${r.steps}-step task checkpointed before each step's call, through the task store (bench/checkpoints.ts): ` +
      "the bytes each checkpoint wrote into its rows (the task's resume_state, and the part it added), summed, " +
      `against the final conversation (${n0(r.conversationBytes)} bytes as JSON). Whole: each checkpoint the loop ` +
      "state with its whole conversation, as before migration 004. Appended: the state and the step's messages.",
    '',
    '| Database | Whole | Appended | Parts held / after the end | A claim gives the same state |',
    '|---|---|---|---|---|',
    ...r.arms.map(
      (a) =>
        `| ${a.database} | ${n0(a.beforeBytes)} (${f2(a.beforeBytes / r.conversationBytes)}×) | ` +
        `${n0(a.afterBytes)} (${f2(a.afterBytes / r.conversationBytes)}×) | ${a.parts} / ${a.partsAfterEnd} | ` +
        `${a.sameOnClaim ? 'yes' : 'no'} |`,
    ),
    ...(r.skipped ? ['', `PostgreSQL not measured: ${r.skipped}`] : []),
    '',
  ];
}
