import type Database from 'better-sqlite3';
import { SqlRefused } from './guard.ts';

// Reading a database's schema for list_tables and describe_table, through SQLite's table-valued pragmas on
// the hardened read-only connection (only SQL written here runs; names are bound or quoted).

interface TableEntry {
  name: string;
  type: string;
  ncol: number;
  wr: number;
  strict: number;
}

function tableList(db: Database.Database, includeSystem: boolean): TableEntry[] {
  const all = db
    .prepare("SELECT name, type, ncol, wr, strict FROM pragma_table_list WHERE schema = 'main' ORDER BY name")
    .all() as TableEntry[];
  return includeSystem ? all : all.filter((t) => t.type !== 'shadow' && !t.name.startsWith('sqlite_'));
}

/** list_tables' answer: tables and views of the main schema, internal ones only when asked. */
export function listTables(db: Database.Database, includeSystem: boolean) {
  const tables = tableList(db, includeSystem).map((t) => ({ name: t.name, type: t.type, columns: t.ncol }));
  return { tables, table_count: tables.length };
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** describe_table's answer: one table's or view's columns, keys, indexes, row count and definition. */
export function describeTable(db: Database.Database, wanted: string) {
  const all = tableList(db, true);
  const entry =
    all.find((t) => t.name === wanted) ?? all.find((t) => t.name.toLowerCase() === wanted.toLowerCase());
  if (!entry) {
    const names = tableList(db, false).map((t) => t.name);
    const shown =
      names.length === 0 ? 'it has no tables' : `its tables and views: ${names.slice(0, 100).join(', ')}`;
    throw new SqlRefused(`No table or view named ${JSON.stringify(wanted)}; ${shown}`);
  }
  const name = entry.name;
  const columns = columnsOf(db, name);
  const pkOrder = db
    .prepare('SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk')
    .pluck()
    .all(name);
  const foreignKeys = foreignKeysOf(db, name);
  const indexes = indexesOf(db, name);
  const rowCount = db
    .prepare(`SELECT count(*) FROM main.${quoteIdent(name)}`)
    .pluck()
    .get() as number;
  const sql = db
    .prepare("SELECT sql FROM sqlite_schema WHERE name = ? AND type IN ('table', 'view')")
    .pluck()
    .get(name) as string | null | undefined;
  return {
    table: name,
    type: entry.type,
    columns,
    primary_key: pkOrder,
    foreign_keys: foreignKeys,
    indexes,
    row_count: rowCount,
    without_rowid: entry.wr === 1,
    strict: entry.strict === 1,
    sql: sql ?? null,
  };
}

/** A table's columns, generated and hidden ones marked. */
function columnsOf(db: Database.Database, name: string) {
  return (
    db
      .prepare('SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?)')
      .all(name) as {
      name: string;
      type: string;
      notnull: number;
      dflt_value: string | null;
      pk: number;
      hidden: number;
    }[]
  ).map((c) => ({
    name: c.name,
    type: c.type === '' ? null : c.type,
    not_null: c.notnull === 1,
    default: c.dflt_value,
    primary_key: c.pk > 0,
    ...(c.hidden === 2 || c.hidden === 3 ? { generated: c.hidden === 2 ? 'virtual' : 'stored' } : {}),
    ...(c.hidden === 1 ? { hidden: true } : {}),
  }));
}

/** A table's foreign keys, each with its columns in order. */
function foreignKeysOf(db: Database.Database, name: string) {
  const fkRows = db
    .prepare(
      'SELECT id, seq, "table", "from", "to", on_update, on_delete FROM pragma_foreign_key_list(?) ORDER BY id, seq',
    )
    .all(name) as {
    id: number;
    table: string;
    from: string;
    to: string | null;
    on_update: string;
    on_delete: string;
  }[];
  const foreignKeys = new Map<
    number,
    {
      columns: string[];
      references: { table: string; columns: (string | null)[] };
      on_update: string;
      on_delete: string;
    }
  >();
  for (const fk of fkRows) {
    const found = foreignKeys.get(fk.id) ?? {
      columns: [],
      references: { table: fk.table, columns: [] },
      on_update: fk.on_update,
      on_delete: fk.on_delete,
    };
    found.columns.push(fk.from);
    found.references.columns.push(fk.to);
    foreignKeys.set(fk.id, found);
  }
  return [...foreignKeys.values()];
}

/** A table's indexes, with where each came from and its columns. */
function indexesOf(db: Database.Database, name: string) {
  return (
    db
      .prepare('SELECT name, "unique", origin, partial FROM pragma_index_list(?) ORDER BY name')
      .all(name) as {
      name: string;
      unique: number;
      origin: string;
      partial: number;
    }[]
  ).map((ix) => ({
    name: ix.name,
    unique: ix.unique === 1,
    origin:
      ({ c: 'create index', u: 'unique constraint', pk: 'primary key' } as Record<string, string>)[
        ix.origin
      ] ?? ix.origin,
    partial: ix.partial === 1,
    columns: db
      .prepare("SELECT coalesce(name, '<expression>') FROM pragma_index_info(?) ORDER BY seqno")
      .pluck()
      .all(ix.name),
  }));
}
