import { type Kysely, sql } from 'kysely';
import { statement } from '../../lib/db/kysely.ts';
import type { DialectHooks } from './dialect.ts';
import type { SessionChange } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

// Sessions and their active toolsets in activation order: each change in one short transaction, announced to
// the other replicas when it changed anything; and the sweep of idle sessions.

type Kdb = Kysely<GatewayDatabase>;

/** The hot statements of sessions, each compiled once (lib/db/kysely.ts statement). */
export function sessionStatements(db: Kdb) {
  return {
    toolsets: statement(db, ['id'], (q, a: { id: string }) =>
      q
        .selectFrom('sessions as s')
        .leftJoin('session_toolsets as t', 't.session_id', 's.id')
        .select(['t.toolset_id', 't.tools'])
        .where('s.id', '=', a.id)
        .orderBy('t.seq'),
    ),
    add: statement(db, ['id', 'at'], (q, a: { id: string; at: string }) =>
      q
        .insertInto('sessions')
        .values({ id: a.id, created_at: a.at })
        .onConflict((oc) => oc.doNothing()),
    ),
    // After those the session has; never one disabled, whatever this replica's cache said a moment ago.
    activate: statement(
      db,
      ['id', 'toolset', 'tools'],
      (q, a: { id: string; toolset: string; tools: string | null }) =>
        q
          .insertInto('session_toolsets')
          .columns(['session_id', 'toolset_id', 'seq', 'tools'])
          .expression(
            q
              .selectNoFrom((eb) => [
                eb.val(a.id).as('session_id'),
                eb.val(a.toolset).as('toolset_id'),
                sql<number>`(SELECT COALESCE(MAX(seq), 0) + 1 FROM session_toolsets WHERE session_id = ${a.id})`.as(
                  'seq',
                ),
                eb.val(a.tools).as('tools'),
              ])
              .where(({ not, exists, selectFrom }) =>
                not(
                  exists(
                    selectFrom('toolset_settings')
                      .select('toolset_id')
                      .where('toolset_id', '=', a.toolset)
                      .where('enabled', '=', 0),
                  ),
                ),
              ),
          )
          .onConflict((oc) => oc.doNothing())
          .returning('toolset_id'),
    ),
    // A toolset active with some of its tools gets more of them, or all (null).
    widen: statement(
      db,
      ['id', 'toolset', 'tools'],
      (q, a: { id: string; toolset: string; tools: string | null }) =>
        q
          .updateTable('session_toolsets')
          .set({ tools: a.tools })
          .where('session_id', '=', a.id)
          .where('toolset_id', '=', a.toolset),
    ),
    deactivate: statement(db, ['id', 'toolset'], (q, a: { id: string; toolset: string }) =>
      q
        .deleteFrom('session_toolsets')
        .where('session_id', '=', a.id)
        .where('toolset_id', '=', a.toolset)
        .returning('toolset_id'),
    ),
  };
}

export type SessionStatements = ReturnType<typeof sessionStatements>;

/** A session's stored toolsets in activation order, and those active with only some of their tools. */
export interface StoredToolsets {
  toolsets: string[];
  only: Map<string, string[]>;
}

/** The session's stored toolsets, or null for a session never stored. */
export async function storedToolsets(
  q: SessionStatements,
  db: Kdb,
  sessionId: string,
): Promise<StoredToolsets | null> {
  const { rows } = await q.toolsets(db, { id: sessionId });
  if (rows.length === 0) return null;
  const stored: StoredToolsets = { toolsets: [], only: new Map() };
  for (const r of rows) {
    if (r.toolset_id === null) continue;
    stored.toolsets.push(r.toolset_id);
    if (r.tools !== null) stored.only.set(r.toolset_id, toolList(r.tools));
  }
  return stored;
}

/** A stored `tools` column: the names it lists (none for a value this store did not write). */
function toolList(text: string): string[] {
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  } catch {
    return [];
  }
}

/** Stores a session never stored, with `initial` active (those enabled); true when it was stored now. */
async function ensureSession(
  q: SessionStatements,
  trx: Kdb,
  sessionId: string,
  initial: readonly string[],
): Promise<boolean> {
  const res = await q.add(trx, { id: sessionId, at: new Date().toISOString() });
  if (Number(res.numAffectedRows ?? 0) === 0) return false;
  await addToolsets(q, trx, sessionId, initial);
  return true;
}

/**
 * Adds toolsets to a session in the given order after those it has, each with the tools `only` names (all when
 * it names none); one it has with some tools gets those too. The ids added or widened.
 */
async function addToolsets(
  q: SessionStatements,
  trx: Kdb,
  sessionId: string,
  ids: readonly string[],
  only?: ReadonlyMap<string, readonly string[]>,
): Promise<Set<string>> {
  const added = new Set<string>();
  let had: StoredToolsets | null | undefined;
  for (const id of ids) {
    const want = only?.get(id);
    const { rows } = await q.activate(trx, {
      id: sessionId,
      toolset: id,
      tools: want ? JSON.stringify(want) : null,
    });
    if (rows[0]) {
      added.add(rows[0].toolset_id);
      continue;
    }
    // Already active: all of it stays all; some of it gets the tools asked for, or all.
    had ??= await storedToolsets(q, trx, sessionId);
    const current = had?.only.get(id);
    if (!current) continue;
    const wider = want ? [...new Set([...current, ...want])] : null;
    if (wider && wider.length === current.length) continue;
    await q.widen(trx, { id: sessionId, toolset: id, tools: wider && JSON.stringify(wider) });
    added.add(id);
  }
  return added;
}

/** The store's changes of sessions and their toolsets. */
export function sessionWrites(db: Kdb, hooks: DialectHooks, q: SessionStatements) {
  /** A change of a session's toolsets in one short transaction, announced when it changed anything. */
  const sessionChange = (
    sessionId: string,
    initial: readonly string[],
    work: (trx: Kdb) => Promise<Set<string>>,
    ids: readonly string[],
  ): Promise<SessionChange> =>
    db.transaction().execute(async (trx) => {
      const created = await ensureSession(q, trx, sessionId, initial);
      const changed = await work(trx);
      const stored = await storedToolsets(q, trx, sessionId);
      if (created || changed.size > 0) await hooks.notify(trx, { kind: 'session', id: sessionId });
      return {
        changed: ids.filter((id) => changed.has(id)),
        toolsets: stored?.toolsets ?? [],
        only: stored?.only ?? new Map(),
      };
    });
  return {
    activate: (
      sessionId: string,
      ids: readonly string[],
      initial: readonly string[],
      only?: ReadonlyMap<string, readonly string[]>,
    ) =>
      sessionChange(
        sessionId,
        initial,
        async (trx) => {
          // The session's row is locked first: two replicas activating in one session at once number in turn.
          await hooks.lockSession(trx, sessionId);
          return addToolsets(q, trx, sessionId, ids, only);
        },
        ids,
      ),
    deactivate: (sessionId: string, ids: readonly string[], initial: readonly string[]) =>
      sessionChange(
        sessionId,
        initial,
        async (trx) => {
          const removed = new Set<string>();
          for (const id of ids) {
            const { rows } = await q.deactivate(trx, { id: sessionId, toolset: id });
            if (rows[0]) removed.add(rows[0].toolset_id);
          }
          return removed;
        },
        ids,
      ),
    async dropSessions(ids: readonly string[]): Promise<void> {
      if (ids.length === 0) return;
      // session_toolsets go with them (ON DELETE CASCADE).
      await db
        .deleteFrom('sessions')
        .where('id', 'in', [...ids])
        .execute();
    },
  };
}

/**
 * Deletes at most `limit` sessions idle since `before` (ISO): created before it, with no audited activity
 * since (every change and call is audited), no MCP handle and no pending approval. Their next use starts
 * from the default toolsets, as a new session does. One statement: a session another replica uses meanwhile
 * is judged with its rows as they are then (and one it holds is skipped).
 */
export async function pruneIdleSessions(
  db: Kdb,
  hooks: DialectHooks,
  firstSince: (before: string) => Promise<number | undefined>,
  before: string,
  limit: number,
): Promise<number> {
  // Activity since `before` is a row at or after the first id written since then: one seek in
  // audit_session, however many rows the session has.
  const since = (await firstSince(before)) ?? Number.MAX_SAFE_INTEGER;
  const idle = db
    .selectFrom('sessions as s')
    .select('s.id')
    .where('s.created_at', '<', before)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('audit as a')
            .select('a.id')
            .whereRef('a.session_id', '=', 's.id')
            .where('a.id', '>=', since),
        ),
      ),
    )
    .where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('mcp_handles as h').select('h.handle').whereRef('h.handle', '=', 's.id'))),
    )
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('approvals as p')
            .select('p.id')
            .whereRef('p.session_id', '=', 's.id')
            .where('p.status', '=', 'pending'),
        ),
      ),
    )
    .limit(limit)
    .$if(hooks.skipLocked, (q) => q.forUpdate().skipLocked());
  const res = await db.deleteFrom('sessions').where('id', 'in', idle).executeTakeFirst();
  return Number(res.numDeletedRows);
}
