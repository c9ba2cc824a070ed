import type Database from 'better-sqlite3';

// The read-only rules of the database tools, applied in the query process (worker.ts). better-sqlite3 has no
// authorizer callback, so the rules are layered, and every layer but the first is SQLite's own decision:
//
// 1. Before compiling (assertReadStatement): only statements that start with SELECT, WITH, VALUES or EXPLAIN
//    [QUERY PLAN] of one of those are compiled at all. Some statements act while being compiled, not run:
//    preparing `PRAGMA cache_size=…` changes the connection, `PRAGMA temp_store_directory=…` a process-wide
//    path, `PRAGMA writable_schema=ON` a connection flag (where defensive mode is off). So "prepare, then
//    inspect" cannot be the first check. This is the one check that reads the SQL text, and it only refuses:
//    whatever it does not recognise is refused. It stops ATTACH, DETACH, VACUUM, PRAGMA and every write.
// 2. Compiling: better-sqlite3's prepare() refuses a string with more than one statement.
// 3. After compiling (assertReadOnlyProgram), SQLite's verdict on the compiled program: it must not contain the
//    Vacuum opcode nor call sqlite_attach, sqlite_detach or load_extension (`EXPLAIN <sql>`, opcode by opcode);
//    `stmt.readonly` (sqlite3_stmt_readonly) must be true, which refuses writes such as WITH … DELETE and
//    VACUUM INTO (which SQLite runs even on a read-only connection, writing a new file); `stmt.reader` must be
//    true (ATTACH, DETACH, BEGIN … return no rows, and SQLite counts ATTACH as read-only).
// 4. The connection (open.ts): SQLITE_OPEN_READONLY (a write fails with SQLITE_READONLY), `query_only` on
//    (VACUUM INTO then fails too, but only after creating its empty target file, which is why layers 1 and 3
//    must stop it first), SQLITE_DBCONFIG_DEFENSIVE on (better-sqlite3's default, re-asserted; it
//    keeps writable_schema off), and `trusted_schema` off, so a view in a hostile file cannot call functions
//    that are not innocuous. The SQL function load_extension() stays disabled ("not authorized"): SQLite
//    enables it only on request, which toolshift never makes (nor calls db.loadExtension()). One connection
//    per call, closed afterwards, in a process that is killed at the deadline (runner.ts).

/** A statement the database tools will not run; its message says why and what is allowed instead. */
export class SqlRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Statement kinds whose compilation has no side effects, so SQLite may be asked about them. */
const READ_KINDS = new Set(['SELECT', 'WITH', 'VALUES']);

/** What kind of statement the SQL is, as far as deciding whether to compile it needs. */
export interface StatementKind {
  /** The statement's first keyword, upper-cased ('EXPLAIN' for an explained statement). */
  keyword: string;
  /** True for EXPLAIN and EXPLAIN QUERY PLAN: the inner statement is described, never run. */
  explain: boolean;
}

/** Skips what SQLite's tokenizer treats as blank: spaces, tabs, newlines, form feeds, and both comment forms. */
function skipBlank(sql: string, from: number): number {
  let i = from;
  for (;;) {
    const c = sql[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f') i++;
    else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end === -1 ? sql.length : end + 2;
    } else return i;
  }
}

/** The next bare word at `from` (after blanks), upper-cased, or '' when something else comes first. */
function wordAt(sql: string, from: number): { word: string; end: number } {
  const start = skipBlank(sql, from);
  const match = /^[A-Za-z_]+/.exec(sql.slice(start, start + 64));
  return { word: match ? match[0].toUpperCase() : '', end: start + (match ? match[0].length : 0) };
}

/** Layer 1: refuses, before SQLite compiles anything, every statement that is not a read. */
export function assertReadStatement(sql: string): StatementKind {
  const first = wordAt(sql, 0);
  let inner = first;
  if (first.word === 'EXPLAIN') {
    inner = wordAt(sql, first.end);
    if (inner.word === 'QUERY') {
      const plan = wordAt(sql, inner.end);
      if (plan.word !== 'PLAN') throw new SqlRefused('EXPLAIN QUERY must be followed by PLAN');
      inner = wordAt(sql, plan.end);
    }
  }
  if (READ_KINDS.has(inner.word)) return { keyword: first.word, explain: first.word === 'EXPLAIN' };
  if (first.word === '' && skipBlank(sql, 0) >= sql.length) throw new SqlRefused('The SQL is empty');
  const shown = inner.word || JSON.stringify(sql.slice(skipBlank(sql, 0), skipBlank(sql, 0) + 20));
  const pragma =
    inner.word === 'PRAGMA'
      ? ' PRAGMA statements are refused because some take effect while being compiled; read a pragma ' +
        "through its table-valued function instead, e.g. SELECT * FROM pragma_table_info('t') or " +
        'SELECT * FROM pragma_user_version.'
      : '';
  throw new SqlRefused(
    `Only read statements run here: SELECT, WITH … SELECT, VALUES, or EXPLAIN [QUERY PLAN] of one of ` +
      `those; this statement starts with ${shown}.${pragma} The database is opened read-only.`,
  );
}

/** Functions a query may never call, with why, as SQLite names them in a compiled program. */
const FORBIDDEN_FUNCTIONS = new Map([
  ['sqlite_attach', 'ATTACH is refused: a query reads only the database named by `path`'],
  ['sqlite_detach', 'DETACH is refused: a query reads only the database named by `path`'],
  [
    'load_extension',
    'load_extension() is refused: loading native code into the database engine is never allowed',
  ],
]);

const CALL_OPCODES = new Set(['Function', 'PureFunc', 'Function0', 'PureFunc0']);

/**
 * Layer 3: SQLite's verdict on the compiled statement. `sql` is the same text `stmt` was prepared from; for a
 * statement that is not itself an EXPLAIN, its program is listed with `EXPLAIN` and checked opcode by opcode.
 */
export function assertReadOnlyProgram(
  db: Database.Database,
  stmt: Database.Statement,
  sql: string,
  kind: StatementKind,
  bind: unknown[] = [],
): void {
  if (!kind.explain) {
    // Listing a program needs its parameters bound, though their values do not change it.
    const program = db.prepare(`EXPLAIN ${sql}`).all(...bind) as { opcode: string; p4: unknown }[];
    for (const op of program) {
      if (op.opcode === 'Vacuum') {
        throw new SqlRefused('VACUUM is refused (VACUUM INTO would write a copy of the database to a file)');
      }
      if (CALL_OPCODES.has(op.opcode) && typeof op.p4 === 'string') {
        const paren = op.p4.indexOf('(');
        const why = FORBIDDEN_FUNCTIONS.get((paren === -1 ? op.p4 : op.p4.slice(0, paren)).toLowerCase());
        if (why) throw new SqlRefused(why);
      }
    }
  }
  if (!stmt.readonly) {
    throw new SqlRefused(
      'The statement would change the database (SQLite does not report it as read-only); ' +
        'the database tools only read',
    );
  }
  if (!stmt.reader) {
    throw new SqlRefused(
      'The statement returns no rows; query runs statements that return rows (SELECT, WITH … SELECT, VALUES, EXPLAIN)',
    );
  }
}

/** Layers 1–3 together: the compiled statement with `bind` bound, ready to run, or SqlRefused. */
export function prepareReadOnly(
  db: Database.Database,
  sql: string,
  bind: unknown[] = [],
): Database.Statement {
  const kind = assertReadStatement(sql);
  const stmt = db.prepare(sql); // throws for a second statement in the string
  assertReadOnlyProgram(db, stmt, sql, kind, bind);
  if (bind.length > 0) stmt.bind(...bind);
  return stmt;
}
