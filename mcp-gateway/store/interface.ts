import type { Pin, PinnedDefinition } from '../catalog/pins.ts';
import type { AuditActor, AuditEntry, AuditFilter, AuditPage } from './audit.ts';

// The gateway's persistence, asynchronous end to end: one implementation (store.ts, over Kysely) on either
// database. The rules above it read what a request needs in one go (`load`), decide without the database, and
// persist their decision in one short transaction or one conditional statement; audit rows are batched.

/** What a request's rules read of the store: the session's toolsets, the ceiling and the defaults. */
export interface SessionView {
  /** The session's stored toolsets in activation order; null for a session never stored (it has the defaults). */
  toolsets: string[] | null;
  /** Toolsets active with only some of their tools, and those tools (absent: all of the toolset's). */
  only: ReadonlyMap<string, readonly string[]>;
  /** Toolsets the operator has disabled. */
  disabled: ReadonlySet<string>;
  /** The user's changes to which toolsets a new session starts with (true: on, false: off). */
  overrides: ReadonlyMap<string, boolean>;
}

/** What a change of a session's toolsets did: the ids it changed, and the session's toolsets after it. */
export interface SessionChange {
  changed: string[];
  toolsets: string[];
  /** Of those, the ones active with only some of their tools, and those tools. */
  only: ReadonlyMap<string, readonly string[]>;
}

/** Sessions and their toolsets, the ceiling, defaults, upstream listings and pins, the audit trail. */
export interface GatewayStore {
  /** One read: the session's toolsets (none asked for with null), the disabled set and the defaults. */
  load(sessionId: string | null): Promise<SessionView>;
  /**
   * Activates in the given order (never a toolset disabled meanwhile), first storing the session with
   * `initial` active when it was never stored; one short transaction. A toolset in `only` gets those of its
   * tools (added to those it has, when it has only some); one not in it gets all of them.
   */
  activate(
    sessionId: string,
    ids: readonly string[],
    initial: readonly string[],
    only?: ReadonlyMap<string, readonly string[]>,
  ): Promise<SessionChange>;
  /** Deactivates, first storing the session with `initial` when it was never stored; one short transaction. */
  deactivate(sessionId: string, ids: readonly string[], initial: readonly string[]): Promise<SessionChange>;
  /** Sets whether new sessions start with these toolsets active. */
  setDefaults(ids: readonly string[], active: boolean): Promise<void>;
  /** Sets the operator's ceiling; disabling also removes the toolsets from every session. */
  setEnabled(ids: readonly string[], enabled: boolean): Promise<void>;
  /** Deletes sessions with their active toolsets. */
  dropSessions(ids: readonly string[]): Promise<void>;
  /** Removes a toolset that no longer exists from every session. */
  dropToolset(toolsetId: string): Promise<void>;
  /** The last tool listing seen from an upstream toolset, in the server's order. */
  lastListing(toolsetId: string): Promise<PinnedDefinition[]>;
  saveListing(toolsetId: string, definitions: readonly PinnedDefinition[]): Promise<void>;
  /** An upstream toolset's approved definitions by tool, or null before it was first seen. */
  pins(toolsetId: string): Promise<Map<string, Pin> | null>;
  pin(toolsetId: string, pins: readonly Pin[]): Promise<void>;
  /** Queues an audit row of `actor` (batched: written with the others of the next few milliseconds). */
  audit(entry: AuditEntry, actor: AuditActor): void;
  /** A page of audit rows, newest first (what is queued is written first). */
  listAudit(filter: AuditFilter): Promise<AuditPage>;
  pruneAudit(before: string, limit: number): Promise<number>;
  pruneAuditOverflow(maxRows: number, limit: number): Promise<number>;
  pruneIdleSessions(before: string, limit: number): Promise<number>;
  /**
   * Discovery's learning (store/learned-keywords.ts): one pass over the audit rows since the last, crediting
   * LIST queries to the toolsets their tasks then used (`toolsetOf` names a tool's toolset); one transaction.
   */
  learnFromAudit(now: number, toolsetOf: (tool: string) => string | undefined): Promise<LearnPass>;
  /** The learned terms that rank at `now`, per toolset, strongest first. */
  learnedKeywords(now: number): Promise<Map<string, string[]>>;
  /** Deletes learned terms last credited before `before` (ms). */
  pruneLearned(before: number): Promise<number>;
  /** Writes the queued audit rows now. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** What a learning pass did: the audit rows it moved over, the credits it made (0, 0: nothing new, or another replica did it). */
export interface LearnPass {
  rows: number;
  credits: number;
}

/** An approval as stored. */
export interface ApprovalRow {
  id: string;
  session_id: string;
  task_id: string | null;
  kind: 'call' | 'activate';
  subject: string;
  arguments: string | null;
  reason: string;
  status: 'pending' | 'approved' | 'denied' | 'expired' | 'used';
  created_at: number;
  decided_at?: number | null;
  decided_by: string | null;
  decision_reason: string | null;
  /** Whose work asked for it (`user:<id>`); null when no user's. */
  for_user: string | null;
}

/** The statements approvals need (ceiling/approvals.ts keeps their rules). */
export interface ApprovalQueries {
  /** Marks pending approvals created before `before` (ms) expired, dated `timeoutMs` after their creation. */
  expire(timeoutMs: number, before: number): Promise<void>;
  find(
    session: string,
    kind: string,
    subject: string,
    hash: string,
    status: ApprovalRow['status'],
    /** Whose work it is (null or absent: nobody's). */
    forUser?: string | null,
  ): Promise<ApprovalRow | undefined>;
  /** Inserts a pending approval unless one of the same request is pending already. */
  insert(
    row: Omit<ApprovalRow, 'status' | 'decided_by' | 'decision_reason'> & { args_hash: string },
  ): Promise<void>;
  /** Marks an approved approval used; false when it was not approved any more (another spent it). */
  spend(id: string): Promise<boolean>;
  get(id: string): Promise<ApprovalRow | undefined>;
  /** Decides a pending approval; the rows changed (0: it was not pending). */
  decide(
    status: 'approved' | 'denied',
    at: number,
    by: string,
    reason: string | null,
    id: string,
  ): Promise<number>;
  prune(before: number, limit: number): Promise<number>;
  /** Newest first; `for_users` (null: everyone's): only approvals of these users' work. */
  list(filter: {
    status: string | null;
    session_id: string | null;
    for_users: readonly string[] | null;
    limit: number;
  }): Promise<ApprovalRow[]>;
  /** Runs `work` in one short transaction, its statements on `q`. */
  transaction<T>(work: (q: ApprovalQueries) => Promise<T>): Promise<T>;
}

/** The statements MCP handles need (face/handles.ts keeps their rules). */
export interface HandleQueries {
  insert(handle: string, credential: string | null, at: number): Promise<void>;
  get(handle: string): Promise<{ credential: string | null; last_used_at: number } | undefined>;
  touch(at: number, handle: string): Promise<void>;
  drop(handle: string): Promise<void>;
  /** Deletes the handles last used before `before`; returns them. */
  sweep(before: number): Promise<string[]>;
  count(credential: string | null): Promise<number>;
  /** Deletes the `n` least recently used handles of `credential`; returns them. */
  dropOldest(credential: string | null, n: number): Promise<string[]>;
}

/** A legacy MCP session's row as stored. */
export interface LegacyRow {
  credential: string | null;
  own_session: string;
  handle: string | null;
  init: string;
  last_seen: number;
}

/** The statements legacy MCP sessions need (face/legacy-store.ts keeps their rules). */
export interface LegacyQueries {
  /** Inserts or replaces a session's row. */
  save(key: string, row: Omit<LegacyRow, 'last_seen'>, now: number): Promise<void>;
  get(key: string): Promise<LegacyRow | undefined>;
  /** Binds a session to a handle; the replicas acting in the session's own gateway session hear of it. */
  setHandle(handle: string | null, key: string): Promise<void>;
  /** Moves last_seen forward (never back), in one transaction for all. */
  touch(seen: readonly (readonly [string, number])[]): Promise<void>;
  drop(key: string): Promise<void>;
  idle(before: number, limit: number): Promise<{ id_hash: string; own_session: string }[]>;
}

/** A key as recorded: `started` until its call ends, then `done` with the outcome (JSON) it answered. */
export interface CallKeyRow {
  key: string;
  session_id: string;
  tool: string;
  state: 'started' | 'done';
  outcome: string | null;
  started_at: number;
}

/** A keyed call about to run: its key (none: only the fence is checked), session, tool and lease. */
export interface CallStart {
  key: string | null;
  session_id: string;
  tool: string;
  task_id: string | null;
  fence: number | null;
  at: number;
}

/** What beginning a call found: it may run, it is fenced off, or its key was used before. */
export type Begun = { run: true } | { fenced: number } | { existing: CallKeyRow };

/**
 * The record of keyed tool calls (exactly-once across gateway replicas, docs/task-loop.md): each idempotency
 * key's start and outcome, and per task the highest fencing number seen.
 */
export interface CallKeyQueries {
  /**
   * One transaction: refuses a fence lower than the task's highest (nothing recorded), raises the highest to
   * this one, and records the key as started unless it exists (then returns it as it stands).
   */
  begin(start: CallStart): Promise<Begun>;
  /** Records the outcome (JSON) of a started key. */
  finish(key: string, outcome: string, at: number): Promise<void>;
  /** Drops a started key whose call was refused before it ran (an approval to ask for, a rate limit). */
  forget(key: string): Promise<void>;
  /** Raises the task's highest fence to `fence` unless higher already; returns the highest. */
  announce(taskId: string, fence: number, at: number): Promise<number>;
  /** Deletes at most `limit` keys started, and fences last seen, before `before` (ms). */
  prune(before: number, limit: number): Promise<number>;
}

/** What another replica changed: the ceiling or defaults, a session's toolsets, a toolset's pins. */
export type GatewayChange =
  | { kind: 'settings' }
  | { kind: 'session'; id: string }
  | { kind: 'pins'; id: string };

/** The gateway's state on one database, and the changes other replicas make. */
export interface GatewayState {
  store: GatewayStore;
  approvals: ApprovalQueries;
  handles: HandleQueries;
  legacy: LegacyQueries;
  callKeys: CallKeyQueries;
  /** Which database it is on. */
  dialect: 'sqlite' | 'postgres';
  /**
   * Hears other replicas' changes (after this replica's caches took them in); returns the stop. On SQLite
   * there are none to hear: a gateway on the same file finds another's commit by the file's version.
   * `onListen` is told each time listening (re)starts: what is announced from then on is heard.
   */
  listen(onChange: (change: GatewayChange) => void, opts?: { onListen?: () => void }): () => Promise<void>;
  close(): Promise<void>;
}
