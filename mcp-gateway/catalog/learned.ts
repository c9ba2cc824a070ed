import { normalizeTerm, tokenize } from './search.ts';

// Discovery that learns from use (docs/upstream-servers.md, "Learned keywords"): when a task's LIST query led to the
// activation of a toolset and then to a successful call of one of its tools, the query's words are credited to
// that toolset. This file is the pure part: which audit rows of a task credit what, how a weight decays, and
// which terms rank. The table and the passes over the audit are store/learned-keywords.ts's.

/** The bounds of what is learned. */
export const LEARNING = {
  /** Terms kept per toolset (the strongest; a weaker one is dropped when a new one comes). */
  termsPerToolset: 40,
  /** Words of one query credited (the first ones, stop words dropped). */
  termsPerQuery: 12,
  /** A credit's weight halves every 30 days: what nobody asks for any more fades out. */
  halfLifeMs: 30 * 86_400_000,
  /**
   * A term ranks only once this many tasks credited it, and not all of them one user's (users' tasks carry
   * `for_user`; tasks of nobody in particular, the operator's or a deployment without users, count as one
   * user, the deployment's own): one task, or one hostile user's many, plant nothing alone.
   */
  minTasks: 2,
  /** ... and while its decayed weight is at least this (two credits fall below it after two half-lives). */
  minWeight: 1,
  /**
   * A term's weight stops growing here, so it fades below minWeight within seven half-lives whatever it was
   * (retention deletes it then) and a flood of tasks buys no more than steady use.
   */
  maxWeight: 64,
} as const;

/** An audit row as the learner reads it (successful `list`, `activate` and `call` rows of one task, by id). */
export interface LearnRow {
  id: number;
  kind: string;
  subject: string;
  /** Whose work (`user:<id>`); null: nobody's in particular. */
  for_user: string | null;
}

/** One credit: the words of `query` to `toolset`, earned by the successful call `callId` of `user`'s task. */
export interface Credit {
  toolset: string;
  terms: string[];
  callId: number;
  /** The task's user; '' for nobody's in particular. */
  user: string;
}

/** A learned term as stored. */
export interface LearnedTerm {
  toolset_id: string;
  term: string;
  weight: number;
  tasks: number;
  /** 1: one user's tasks credited it (last_user's), 2: more than one. */
  users: number;
  last_user: string;
  updated_at: number;
}

/** A query's indexed words (stemmed, stop words dropped), each once, at most LEARNING.termsPerQuery. */
export function queryTerms(query: string): string[] {
  const terms = new Set<string>();
  for (const word of tokenize(query)) {
    const term = normalizeTerm(word);
    if (term !== null) terms.add(term);
    if (terms.size >= LEARNING.termsPerQuery) break;
  }
  return [...terms];
}

/**
 * The credits of one task's rows (in id order): a toolset activated after a LIST is credited the words of the
 * last LIST before its activation, at its first successful call after it; once per task and toolset, so a
 * task repeating itself counts once. `toolsetOf` names a called tool's toolset (undefined: none now).
 */
export function creditsOf(
  rows: readonly LearnRow[],
  toolsetOf: (tool: string) => string | undefined,
): Credit[] {
  let lastQuery: string | null = null;
  const waiting = new Map<string, string>();
  const credited = new Set<string>();
  const credits: Credit[] = [];
  for (const row of rows) {
    if (row.kind === 'list') lastQuery = row.subject;
    else if (row.kind === 'activate' && lastQuery !== null) {
      for (const id of row.subject.split(',')) if (!waiting.has(id)) waiting.set(id, lastQuery);
    } else if (row.kind === 'call') {
      const toolset = toolsetOf(row.subject);
      const query = toolset === undefined ? undefined : waiting.get(toolset);
      if (toolset === undefined || query === undefined || credited.has(toolset)) continue;
      credited.add(toolset);
      const terms = queryTerms(query);
      if (terms.length > 0) credits.push({ toolset, terms, callId: row.id, user: row.for_user ?? '' });
    }
  }
  return credits;
}

/** `weight` as it stands `now`, decayed since `at` (ms). */
export function decayed(weight: number, at: number, now: number): number {
  return weight * 0.5 ** (Math.max(0, now - at) / LEARNING.halfLifeMs);
}

/** Whether two sets of learned terms are the same (the index is rebuilt only when they are not). */
export function sameTerms(
  a: ReadonlyMap<string, readonly string[]>,
  b: ReadonlyMap<string, readonly string[]>,
): boolean {
  if (a.size !== b.size) return false;
  for (const [id, terms] of a) {
    const other = b.get(id);
    if (!other || other.length !== terms.length || terms.some((t, i) => other[i] !== t)) return false;
  }
  return true;
}

/** The terms that rank, per toolset, strongest first: credited by enough tasks and not faded out. */
export function rankedTerms(rows: readonly LearnedTerm[], now: number): Map<string, string[]> {
  const live = rows
    .map((r) => ({ ...r, now: decayed(r.weight, r.updated_at, now) }))
    .filter(
      (r) =>
        r.tasks >= LEARNING.minTasks && (r.users > 1 || r.last_user === '') && r.now >= LEARNING.minWeight,
    )
    .sort((a, b) => b.now - a.now || a.term.localeCompare(b.term));
  const out = new Map<string, string[]>();
  for (const r of live) {
    const terms = out.get(r.toolset_id) ?? [];
    if (terms.length < LEARNING.termsPerToolset) terms.push(r.term);
    out.set(r.toolset_id, terms);
  }
  return out;
}
