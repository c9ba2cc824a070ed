import { sql } from 'kysely';
import { type LimitName, LimitReached, type LimitSubject, secondsLeft, windowStart } from './limits.ts';
import type { Db } from './people.ts';

// What users and teams used of their limits (identity_usage): a row per subject, limit and window, bumped by one
// atomic statement (an upsert that refuses to pass the limit), so replicas sharing the database share the count.

const limitedBy = (subjects: readonly LimitSubject[], limit: LimitName) =>
  subjects.filter((s) => s.limits[limit] !== undefined);

/**
 * Counts `amount` of `limit` against each subject that has it, all or none: past any one's limit nothing is
 * counted and LimitReached says whose. One statement per subject, in one transaction.
 */
export async function charge(
  db: Db,
  subjects: readonly LimitSubject[],
  limit: LimitName,
  amount: number,
  now: number,
): Promise<void> {
  const limited = limitedBy(subjects, limit);
  if (limited.length === 0) return;
  const start = windowStart(limit, now);
  const bump = async (on: Db, s: LimitSubject) => {
    const max = s.limits[limit] as number;
    const row = await on
      .insertInto('identity_usage')
      .values({ subject: s.key, name: limit, window_start: start, n: amount })
      .onConflict((oc) =>
        oc
          .columns(['subject', 'name', 'window_start'])
          .doUpdateSet({ n: sql`identity_usage.n + excluded.n` })
          .where(sql<boolean>`identity_usage.n + excluded.n <= ${max}`),
      )
      .returning('n')
      .executeTakeFirst();
    if (!row || Number(row.n) > max) throw new LimitReached(limit, s, secondsLeft(limit, now));
  };
  // One subject (a user in no limited team): its statement alone, no transaction around it.
  if (limited.length === 1) return bump(db, limited[0]);
  await db.transaction().execute(async (trx) => {
    for (const s of limited) await bump(trx, s);
  });
}

/** Gives back `amount` counted at `now` for something that did not happen: never below zero, never a new row. */
export async function giveBack(
  db: Db,
  subjects: readonly LimitSubject[],
  limit: LimitName,
  amount: number,
  now: number,
): Promise<void> {
  const keys = limitedBy(subjects, limit).map((s) => s.key);
  if (keys.length === 0 || amount <= 0) return;
  await db
    .updateTable('identity_usage')
    .set({ n: sql`CASE WHEN n > ${amount} THEN n - ${amount} ELSE 0 END` })
    .where('name', '=', limit)
    .where('window_start', '=', windowStart(limit, now))
    .where('subject', 'in', keys)
    .execute();
}

/** Counts what was used already (a model call's tokens, known after it), past the limit or not. */
export async function add(
  db: Db,
  subjects: readonly LimitSubject[],
  limit: LimitName,
  amount: number,
  now: number,
): Promise<void> {
  if (amount <= 0) return;
  const start = windowStart(limit, now);
  for (const s of limitedBy(subjects, limit)) {
    await db
      .insertInto('identity_usage')
      .values({ subject: s.key, name: limit, window_start: start, n: amount })
      .onConflict((oc) =>
        oc
          .columns(['subject', 'name', 'window_start'])
          .doUpdateSet({ n: sql`identity_usage.n + excluded.n` }),
      )
      .execute();
  }
}

/** Refuses (LimitReached) when a subject has used all of `limit` in the current window. */
export async function refuseIfSpent(
  db: Db,
  subjects: readonly LimitSubject[],
  limit: LimitName,
  now: number,
): Promise<void> {
  const limited = limitedBy(subjects, limit);
  if (limited.length === 0) return;
  const rows = await db
    .selectFrom('identity_usage')
    .select(['subject', 'n'])
    .where('name', '=', limit)
    .where('window_start', '=', windowStart(limit, now))
    .where(
      'subject',
      'in',
      limited.map((s) => s.key),
    )
    .execute();
  for (const s of limited) {
    const used = Number(rows.find((r) => r.subject === s.key)?.n ?? 0);
    if (used >= (s.limits[limit] as number)) throw new LimitReached(limit, s, secondsLeft(limit, now));
  }
}

/** Deletes the usage of windows that started before `before`. */
export async function pruneUsage(db: Db, before: number): Promise<number> {
  const res = await db.deleteFrom('identity_usage').where('window_start', '<', before).executeTakeFirst();
  return Number(res.numDeletedRows);
}
