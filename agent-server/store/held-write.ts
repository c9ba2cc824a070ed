import { type Compilable, type CompiledQuery, sql } from 'kysely';
import { compiledOnce } from '../../lib/db/kysely.ts';
import type { DialectHooks, Kdb } from './dialect.ts';

// The hot writes of a running task (a call's record, a checkpoint, a pause, the end), each built and compiled
// once per store: built on every call, Kysely's query building and compiling cost more than SQLite takes to run
// them.

/** What every such write is checked with: the task, the fence it is held under here and the lease's clock. */
export interface HeldArgs {
  task: string;
  fence: number | null;
  now: number;
}

/** A write's query as built: an UPDATE or INSERT that can be given a RETURNING. */
type WriteQuery = Compilable<unknown> & { returning(selection: unknown): Compilable<unknown> };

/**
 * `build` compiled once for a task held under a fence, with RETURNING 1 where PostgreSQL's oneWrite reads the
 * rows it changed from it; a write without a fence (a task this worker holds no lease of) has another check, and
 * is built each time.
 */
export function heldWrite<A extends Record<string, unknown>>(
  db: Kdb,
  hooks: DialectHooks,
  names: readonly (keyof A & string)[],
  build: (db: Kdb, args: A & HeldArgs) => WriteQuery,
): (args: A & HeldArgs) => CompiledQuery {
  const final = (q: WriteQuery): Compilable<unknown> =>
    hooks.oneWrite ? q.returning(sql<number>`1`.as('one')) : q;
  const bind = compiledOnce<unknown, A & HeldArgs, unknown>(
    db as never,
    [...names, 'task', 'fence', 'now'],
    (d, a) => final(build(d as Kdb, a)),
  );
  return (args) => (args.fence === null ? final(build(db, args)).compile() : bind(args));
}
