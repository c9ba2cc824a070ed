// The gateway's tables (store.ts creates them when missing; later columns are added there).

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS session_toolsets (
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  toolset_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (session_id, toolset_id)
);
CREATE TABLE IF NOT EXISTS toolset_settings (toolset_id TEXT PRIMARY KEY, enabled INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS toolset_defaults (toolset_id TEXT PRIMARY KEY, active INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  session_id TEXT,
  kind TEXT NOT NULL,
  subject TEXT NOT NULL,
  ok INTEGER NOT NULL,
  detail TEXT
);
CREATE TABLE IF NOT EXISTS upstream_tools (
  toolset_id TEXT NOT NULL,
  tool TEXT NOT NULL,
  position INTEGER NOT NULL,
  definition TEXT NOT NULL,
  PRIMARY KEY (toolset_id, tool)
);
CREATE TABLE IF NOT EXISTS pinned_toolsets (toolset_id TEXT PRIMARY KEY, first_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tool_pins (
  toolset_id TEXT NOT NULL,
  tool TEXT NOT NULL,
  hash TEXT NOT NULL,
  definition TEXT NOT NULL,
  approved_at TEXT NOT NULL,
  PRIMARY KEY (toolset_id, tool)
);
`;
