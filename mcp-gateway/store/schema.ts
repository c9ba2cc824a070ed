import type { ColumnType } from 'kysely';

// The gateway's tables, one typed schema for both databases (SQLite's gateway.db and PostgreSQL): what
// migrations.ts creates, and what every statement of the store reads and writes. Booleans are integers (0/1)
// in both; times are ISO text (`*_at` of sessions, audit, pins) or milliseconds (approvals, handles, legacy
// sessions, keyed calls). PostgreSQL answers its BIGINT columns as text: those are typed `Int8` here, and the
// store reads them with Number().

/** A BIGINT column: written as a number, read back as a number (SQLite) or its decimal text (PostgreSQL). */
export type Int8 = ColumnType<number | string, number, number>;

export interface GatewayDatabase {
  sessions: { id: string; created_at: string };
  /**
   * A session's active toolsets; `seq` orders them as they were activated; `tools`, a JSON array of tool names,
   * when only those of the toolset are active (null: all of them).
   */
  session_toolsets: { session_id: string; toolset_id: string; seq: number; tools: string | null };
  /** The operator's ceiling: a toolset enabled (1) or disabled (0) for everyone. */
  toolset_settings: { toolset_id: string; enabled: number };
  /** The user's changes to which toolsets a new session starts with. */
  toolset_defaults: { toolset_id: string; active: number };
  audit: {
    /** Written by the database (SQLite's rowid, PostgreSQL's sequence). */
    id: ColumnType<number | string, number | undefined, number>;
    at: string;
    session_id: string | null;
    task_id: string | null;
    actor: string | null;
    kind: string;
    subject: string;
    ok: number;
    detail: string | null;
    /** Whose work the row is (`user:<id>`); null for the operator's, the system's and rows from before users. */
    for_user: string | null;
  };
  /** An upstream toolset's last listing, in the server's order. */
  upstream_tools: { toolset_id: string; tool: string; position: number; definition: string };
  /** Upstream toolsets whose definitions are pinned (from their first sight on). */
  pinned_toolsets: { toolset_id: string; first_at: string };
  tool_pins: { toolset_id: string; tool: string; hash: string; definition: string; approved_at: string };
  approvals: {
    id: string;
    session_id: string;
    task_id: string | null;
    kind: string;
    subject: string;
    arguments: string | null;
    args_hash: string;
    reason: string;
    status: string;
    created_at: Int8;
    decided_at: ColumnType<number | string | null, number | null, number | null>;
    decided_by: string | null;
    decision_reason: string | null;
    /** Whose work asked for it (`user:<id>`); null when no user's. */
    for_user: string | null;
  };
  mcp_handles: { handle: string; credential: string | null; created_at: Int8; last_used_at: Int8 };
  mcp_legacy_sessions: {
    id_hash: string;
    credential: string | null;
    own_session: string;
    handle: string | null;
    init: string;
    created_at: Int8;
    last_seen: Int8;
  };
  call_keys: {
    key: string;
    session_id: string;
    tool: string;
    task_id: string | null;
    fence: ColumnType<number | string | null, number | null, number | null>;
    state: string;
    outcome: string | null;
    started_at: Int8;
    finished_at: ColumnType<number | string | null, number | null, number | null>;
  };
  task_fences: { task_id: string; fence: Int8; seen_at: Int8 };
  /** Discovery's learned keywords (store/learned-keywords.ts): a term credited to a toolset by its use. */
  learned_keywords: {
    toolset_id: string;
    /** A word as the search index keeps it (stemmed). */
    term: string;
    /** The credits, decayed to updated_at (catalog/learned.ts LEARNING). */
    weight: number;
    /** The tasks that credited it. */
    tasks: number;
    /** 1: one user's tasks credited it (last_user's; '' for nobody's in particular), 2: more than one user's. */
    users: number;
    last_user: string;
    updated_at: Int8;
  };
  /** How far the learner has read the audit (`name`: `audit`). */
  learn_cursor: { name: string; last_id: Int8; at: Int8 };
}
