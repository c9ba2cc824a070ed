import { CompiledQuery, type Insertable, type Kysely, type RawBuilder, type SqlBool, sql } from 'kysely';
import { type DialectName, fixedChunks } from '../../lib/db/kysely.ts';
import type { GatewayChange } from './interface.ts';
import type { GatewayDatabase } from './schema.ts';

// What differs between the two databases, behind small named hooks; every other statement of the store is
// written once. PostgreSQL: a session's row locked while its toolsets are numbered, changes announced to the
// other replicas (NOTIFY, delivered at commit), a batch of rows in one statement (unnest), sweeps that skip
// rows another replica holds. SQLite: one writer at a time already serialises, there are no replicas to tell
// (another gateway on the same file sees the file's version move), rows go in a few multi-row statements of a
// handful of fixed sizes (each size's SQL prepared once).

/** The channel replicas announce their changes on. */
export const GATEWAY_CHANNEL = 'toolshift_gateway';

type Db = Kysely<GatewayDatabase>;
export type AuditInsert = Insertable<GatewayDatabase['audit']>;

export interface DialectHooks {
  name: DialectName;
  /** Locks session `id`'s row until the transaction ends (PostgreSQL), so two replicas number its toolsets in turn. */
  lockSession(trx: Db, id: string): Promise<void>;
  /** Appends audit rows in as few statements as the database takes. */
  appendAudit(db: Db, rows: readonly AuditInsert[]): Promise<void>;
  /** Announces a change to the other replicas, with the transaction it is part of (sent at its commit). */
  notify(trx: Db, change: GatewayChange): Promise<void>;
  /** A condition on `audit`: its subject is one of `subjects`, or a comma-separated list holding one. */
  subjectIn(subjects: readonly string[]): RawBuilder<SqlBool>;
  /** Whether a sweep may skip rows other transactions hold (FOR UPDATE SKIP LOCKED). */
  skipLocked: boolean;
  /**
   * Whether another connection committed since this was last asked (SQLite's data_version: a second gateway on
   * the same file). Asked once per turn of the event loop at most. PostgreSQL: never (notifications say it).
   */
  changedElsewhere(db: Db): Promise<boolean>;
}

/** The hooks of `dialect`; `origin` names this replica in its notifications (it does not act on its own). */
export function dialectHooks(dialect: DialectName, origin: string): DialectHooks {
  return dialect === 'postgres' ? postgresHooks(origin) : sqliteHooks();
}

function postgresHooks(origin: string): DialectHooks {
  return {
    name: 'postgres',
    async lockSession(trx, id) {
      await trx.selectFrom('sessions').select('id').where('id', '=', id).forUpdate().execute();
    },
    async appendAudit(db, rows) {
      if (rows.length === 0) return;
      // One statement for the batch, whatever its size: a column per field, unnested together.
      const column = <K extends keyof AuditInsert>(k: K) => rows.map((r) => r[k] ?? null);
      await sql`INSERT INTO audit (at, session_id, kind, subject, ok, detail, actor, task_id, for_user)
        SELECT * FROM unnest(${column('at')}::text[], ${column('session_id')}::text[], ${column('kind')}::text[],
          ${column('subject')}::text[], ${column('ok')}::integer[], ${column('detail')}::text[],
          ${column('actor')}::text[], ${column('task_id')}::text[], ${column('for_user')}::text[])`.execute(
        db,
      );
    },
    async notify(trx, change) {
      let payload = JSON.stringify({ origin, ...change });
      // Ids are bounded by the contracts; one that would not fit a notification tells everyone to read afresh.
      if (Buffer.byteLength(payload) > 7900) payload = JSON.stringify({ origin, kind: 'settings' });
      await sql`SELECT pg_notify(${GATEWAY_CHANNEL}, ${payload})`.execute(trx);
    },
    subjectIn: (subjects) =>
      sql<SqlBool>`EXISTS (SELECT 1 FROM unnest(${[...subjects]}::text[]) j(v)
        WHERE strpos(',' || audit.subject || ',', ',' || j.v || ',') > 0)`,
    skipLocked: true,
    changedElsewhere: async () => false,
  };
}

const DATA_VERSION = CompiledQuery.raw('PRAGMA data_version') as CompiledQuery<{ data_version: number }>;

function sqliteHooks(): DialectHooks {
  let seen: number | undefined;
  let asked: Promise<boolean> | null = null;
  return {
    name: 'sqlite',
    // One writer at a time (the file's lock, and one connection per store with Kysely's mutex).
    lockSession: async () => {},
    async appendAudit(db, rows) {
      if (rows.length === 0) return;
      await db.transaction().execute(async (trx) => {
        for (const chunk of fixedChunks(rows)) await trx.insertInto('audit').values(chunk).execute();
      });
    },
    notify: async () => {},
    // A subject equal to one of them (one instr against them all joined, read once), or a comma-separated list
    // of toolsets holding one (only subjects with a comma are looked into).
    subjectIn(subjects) {
      const list = JSON.stringify(subjects);
      return sql<SqlBool>`(instr((SELECT ',' || group_concat(value, ',') || ',' FROM json_each(${list})),
          ',' || audit.subject || ',') > 0
        OR (instr(audit.subject, ',') > 0 AND EXISTS (SELECT 1 FROM json_each(${list}) j
          WHERE instr(',' || audit.subject || ',', ',' || j.value || ',') > 0)))`;
    },
    skipLocked: false,
    changedElsewhere(db) {
      if (!asked) {
        asked = db.executeQuery<{ data_version: number }>(DATA_VERSION).then(({ rows }) => {
          const version = rows[0]?.data_version;
          const changed = seen !== undefined && version !== seen;
          seen = version;
          return changed;
        });
        setImmediate(() => {
          asked = null;
        });
      }
      return asked;
    },
  };
}
