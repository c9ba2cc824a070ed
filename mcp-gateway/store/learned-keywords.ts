import type { Kysely, Selectable } from 'kysely';
import type { Logger } from '../../lib/telemetry/log.ts';
import {
  type Credit,
  creditsOf,
  decayed,
  LEARNING,
  type LearnedTerm,
  type LearnRow,
  rankedTerms,
} from '../catalog/learned.ts';
import { DEFAULT_SESSION } from '../contract.ts';
import type { GatewayStore, LearnPass } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

// The learned keywords of discovery (catalog/learned.ts says what is learned): the table, and the pass that
// reads the audit rows written since the last one and credits their tasks' LIST queries to the toolsets used.
// A pass is one short transaction that first moves the cursor (`learn_cursor`) from where it read it: a second
// replica running the same pass finds the cursor moved (PostgreSQL: it waits on the row, then updates nothing)
// and learns nothing, so no credit counts twice.

/** The most audit rows one pass moves over (the rows of their tasks are read with them). */
const PASS_ROWS = 2000;
/**
 * Rows younger than this wait for the next pass: on PostgreSQL two replicas' rows may commit out of id order,
 * and a row the cursor passed before it committed would never be read.
 */
const SETTLE_MS = 60_000;
const CURSOR = 'audit';
/** Passes one run may make through a backlog (100,000 rows); the rest waits for the next run. */
const CATCH_UP_PASSES = 50;

type Db = Kysely<GatewayDatabase>;

export function learnedKeywordQueries(db: Db) {
  return {
    /**
     * One pass over the audit rows written since the last (up to `now` less a minute): credits the LIST queries
     * of the tasks that called a tool of an activated toolset. `toolsetOf` names a tool's toolset.
     */
    learnFromAudit: (now: number, toolsetOf: (tool: string) => string | undefined): Promise<LearnPass> =>
      db.transaction().execute((trx) => learnPass(trx, now, toolsetOf)),
    /** The learned terms that rank now, per toolset, strongest first. */
    async learnedKeywords(now: number): Promise<Map<string, string[]>> {
      const rows = await db.selectFrom('learned_keywords').selectAll().execute();
      return rankedTerms(rows.map(asTerm), now);
    },
    /** Retention: deletes the terms last credited before `before` (ms), faded below use whatever their weight. */
    async pruneLearned(before: number): Promise<number> {
      const res = await db.deleteFrom('learned_keywords').where('updated_at', '<', before).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}

/** A stored row with its numbers as numbers (PostgreSQL answers BIGINT as text). */
const asTerm = (r: Selectable<GatewayDatabase['learned_keywords']>): LearnedTerm => ({
  ...r,
  weight: Number(r.weight),
  tasks: Number(r.tasks),
  users: Number(r.users),
  updated_at: Number(r.updated_at),
});

async function learnPass(
  trx: Db,
  now: number,
  toolsetOf: (tool: string) => string | undefined,
): Promise<LearnPass> {
  await trx
    .insertInto('learn_cursor')
    .values({ name: CURSOR, last_id: 0, at: now })
    .onConflict((oc) => oc.doNothing())
    .execute();
  const cursor = await trx
    .selectFrom('learn_cursor')
    .select('last_id')
    .where('name', '=', CURSOR)
    .executeTakeFirstOrThrow();
  const from = Number(cursor.last_id);
  const settled = new Date(now - SETTLE_MS).toISOString();
  const ids = await trx
    .selectFrom('audit')
    .select('id')
    .where('id', '>', from)
    .where('at', '<=', settled)
    .orderBy('id')
    .limit(PASS_ROWS)
    .execute();
  const last = ids.at(-1);
  if (last === undefined) return { rows: 0, credits: 0 };
  const to = Number(last.id);
  const claimed = await trx
    .updateTable('learn_cursor')
    .set({ last_id: to, at: now })
    .where('name', '=', CURSOR)
    .where('last_id', '=', from)
    .executeTakeFirst();
  if (Number(claimed.numUpdatedRows) === 0) return { rows: 0, credits: 0 };
  const byTask = await taskRows(trx, from, to);
  // A credit counts in the pass that reads its call; the rows before it are read again for context only.
  const credits = [...byTask.values()]
    .flatMap((rows) => creditsOf(rows, toolsetOf))
    .filter((c) => c.callId > from);
  await credit(trx, credits, now);
  return { rows: ids.length, credits: credits.length };
}

/**
 * How far back, in audit rows, a call's LIST and activation are looked for: a task's own steps are close
 * together, and a long-lived session without tasks (an MCP client's) is not read back to its start every pass.
 */
const CONTEXT_ROWS = 100_000;

/**
 * The successful list, activate and call rows up to `to`, and CONTEXT_ROWS before `from`, of each task (or task-less session)
 * that called in (from, to]. The shared `default` session, every caller's that names none, teaches nothing: one
 * caller's LIST is not another's call.
 */
async function taskRows(trx: Db, from: number, to: number): Promise<Map<string, LearnRow[]>> {
  const callers = await trx
    .selectFrom('audit')
    .select(['task_id', 'session_id'])
    .distinct()
    .where('id', '>', from)
    .where('id', '<=', to)
    .where('kind', '=', 'call')
    .where('ok', '=', 1)
    .execute();
  const tasks = [...new Set(callers.flatMap((c) => (c.task_id === null ? [] : [c.task_id])))];
  const sessions = [
    ...new Set(
      callers.flatMap((c) =>
        c.task_id === null && c.session_id !== null && c.session_id !== DEFAULT_SESSION ? [c.session_id] : [],
      ),
    ),
  ];
  const byTask = new Map<string, LearnRow[]>();
  if (tasks.length === 0 && sessions.length === 0) return byTask;
  const rows = await trx
    .selectFrom('audit')
    .select(['id', 'kind', 'subject', 'task_id', 'session_id', 'for_user'])
    .where('id', '<=', to)
    .where('id', '>', Math.max(0, from - CONTEXT_ROWS))
    .where('ok', '=', 1)
    .where('kind', 'in', ['list', 'activate', 'call'])
    .where((eb) =>
      eb.or([
        ...(tasks.length > 0 ? [eb('task_id', 'in', tasks)] : []),
        ...(sessions.length > 0
          ? [eb.and([eb('task_id', 'is', null), eb('session_id', 'in', sessions)])]
          : []),
      ]),
    )
    .orderBy('id')
    .execute();
  for (const r of rows) {
    const key = r.task_id ?? `session:${r.session_id}`;
    const list = byTask.get(key) ?? [];
    list.push({ id: Number(r.id), kind: r.kind, subject: r.subject, for_user: r.for_user });
    byTask.set(key, list);
  }
  return byTask;
}

/** Adds the credits to the stored terms (decayed to `now`), keeping each touched toolset's strongest terms. */
async function credit(trx: Db, credits: readonly Credit[], now: number): Promise<void> {
  for (const toolset of new Set(credits.map((c) => c.toolset))) {
    const stored = (
      await trx.selectFrom('learned_keywords').selectAll().where('toolset_id', '=', toolset).execute()
    ).map(asTerm);
    const byTerm = new Map(stored.map((r) => [r.term, r]));
    for (const c of credits.filter((x) => x.toolset === toolset)) {
      for (const term of c.terms) {
        const old = byTerm.get(term);
        const weight = Math.min(LEARNING.maxWeight, (old ? decayed(old.weight, old.updated_at, now) : 0) + 1);
        // Two users are enough to know a term is not one user's: the count stops there.
        const users = !old ? 1 : old.last_user === c.user ? old.users : 2;
        const tasks = (old?.tasks ?? 0) + 1;
        byTerm.set(term, {
          toolset_id: toolset,
          term,
          weight,
          tasks,
          users,
          last_user: c.user,
          updated_at: now,
        });
      }
    }
    // Terms two users taught first: one user's many cannot push out what others taught.
    const shared = (t: { users: number }) => (t.users >= 2 ? 1 : 0);
    const kept = [...byTerm.values()]
      .sort(
        (a, b) =>
          shared(b) - shared(a) ||
          decayed(b.weight, b.updated_at, now) - decayed(a.weight, a.updated_at, now) ||
          b.tasks - a.tasks,
      )
      .slice(0, LEARNING.termsPerToolset);
    await trx.deleteFrom('learned_keywords').where('toolset_id', '=', toolset).execute();
    if (kept.length > 0) await trx.insertInto('learned_keywords').values(kept).execute();
  }
}

/** How often the learner reads the audit: what was learned reaches the ranking within this. */
export const LEARN_INTERVAL_MS = 5 * 60_000;

/** What the learner needs: the store, the catalog's tool owners, and where the ranked terms go. */
export interface LearnerDeps {
  store: Pick<GatewayStore, 'learnFromAudit' | 'learnedKeywords'>;
  toolsetOf(tool: string): string | undefined;
  apply(learned: ReadonlyMap<string, readonly string[]>): void;
  log: Logger;
  intervalMs?: number;
  now?: () => number;
}

/**
 * Starts learning (DISCOVERY_LEARNING): a pass now, then one every LEARN_INTERVAL_MS on an unref'd timer; each
 * then hands the ranked terms (this replica's learning and every other's) to the catalog.
 */
export function startLearner(deps: LearnerDeps): { runOnce(): Promise<void>; stop(): Promise<void> } {
  const clock = deps.now ?? Date.now;
  let running: Promise<void> | null = null;
  let stopped = false;
  const pass = async () => {
    const now = clock();
    // A backlog (the first start over an old audit) is read a pass at a time, a bounded number per run.
    for (let i = 0; i < CATCH_UP_PASSES; i++) {
      const done = await deps.store.learnFromAudit(now, deps.toolsetOf);
      if (done.credits > 0) deps.log.debug({ ...done }, 'discovery learned from the audit');
      if (done.rows < PASS_ROWS) break;
    }
    deps.apply(await deps.store.learnedKeywords(now));
  };
  /** Starts a run unless one is under way; a run's failure is reported, and the next tries again. */
  const kick = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    running ??= pass()
      .catch((err) => deps.log.warn({ err }, 'discovery learning pass failed; the next one tries again'))
      .finally(() => {
        running = null;
      });
    return running;
  };
  const timer = setInterval(kick, deps.intervalMs ?? LEARN_INTERVAL_MS);
  timer.unref();
  setImmediate(kick);
  return {
    runOnce: kick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
