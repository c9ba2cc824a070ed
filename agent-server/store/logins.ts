import type { Kdb } from './dialect.ts';
import type { StoredLogin, TaskStore } from './interface.ts';

// The console's logins and one-time login codes (agent-server/console/sessions.ts): only a hash of each secret.

type LoginMethods = Pick<TaskStore, 'saveLogin' | 'login' | 'takeLoginCode' | 'dropLogin' | 'pruneLogins'>;

/** A stored login with its expiry as a number (PostgreSQL answers BIGINT as text). */
const asLogin = (row: Omit<StoredLogin, 'expires_at'> & { expires_at: number | string }): StoredLogin => ({
  ...row,
  expires_at: Number(row.expires_at),
});

export function loginMethods(db: Kdb): LoginMethods {
  const columns = ['id_hash', 'kind', 'role', 'sealed', 'expires_at'] as const;
  return {
    async saveLogin(login) {
      await db.insertInto('console_logins').values(login).execute();
    },
    async login(idHash) {
      const row = await db
        .selectFrom('console_logins')
        .select(columns)
        .where('id_hash', '=', idHash)
        .where('kind', '=', 'session')
        .where('expires_at', '>', Date.now())
        .executeTakeFirst();
      return row && asLogin(row);
    },
    // Deleted as it is read: once, across every process.
    async takeLoginCode(idHash) {
      const row = await db
        .deleteFrom('console_logins')
        .where('id_hash', '=', idHash)
        .where('kind', '=', 'code')
        .returning(columns)
        .executeTakeFirst();
      return row && Number(row.expires_at) > Date.now() ? asLogin(row) : undefined;
    },
    async dropLogin(idHash) {
      await db.deleteFrom('console_logins').where('id_hash', '=', idHash).execute();
    },
    async pruneLogins(limit) {
      const res = await db
        .deleteFrom('console_logins')
        .where('id_hash', 'in', (eb) =>
          eb
            .selectFrom('console_logins')
            .select('id_hash')
            .where('expires_at', '<=', Date.now())
            .limit(limit),
        )
        .executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
