import type { ColumnType, Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// The people who use a deployment, their teams, their API keys and what they used of their limits: one typed
// schema for both databases (SQLite's identity.db in the data directory, shared by the services on the machine;
// PostgreSQL's DATABASE_URL, shared by every replica). Times of rows are ISO text; expiries, last uses and limit
// windows are milliseconds (BIGINT: PostgreSQL answers them as text, read with Number()).

type Int8 = ColumnType<number | string, number, number>;
type NullableInt8 = ColumnType<number | string | null, number | null | undefined, number | null>;

export interface IdentityDatabase {
  /** A person. `limits`: their own limits (JSON of limits.ts Limits), null for none. */
  identity_users: {
    id: string;
    name: string;
    email: string | null;
    limits: string | null;
    created_at: string;
  };
  /**
   * A team: its own limits (JSON), null for none; the toolsets its members may not use (a JSON list of ids, its
   * ceiling inside the operator's), null for none.
   */
  identity_teams: {
    id: string;
    name: string;
    limits: string | null;
    disabled_toolsets: ColumnType<string | null, string | null | undefined, string | null>;
    /** Its policy overlay: rules in the operator's policy file's YAML, applied on top of it (null: none). */
    policy: ColumnType<string | null, string | null | undefined, string | null>;
    created_at: string;
  };
  identity_members: { team_id: string; user_id: string };
  /** A key: only the hash of its secret; revoked and expired keys stay (their id is in the audit). */
  identity_keys: {
    id: string;
    hash: string;
    user_id: string;
    role: string;
    label: string | null;
    created_at: string;
    expires_at: NullableInt8;
    last_used_at: NullableInt8;
    revoked_at: NullableInt8;
  };
  /**
   * A person as an identity provider knows them (its issuer and their `sub`), and the user they sign in as. Kept
   * when the user is removed: their sign-in is then refused, not a new user made.
   */
  identity_sign_ins: { issuer: string; subject: string; user_id: string; created_at: string };
  /** A user's own value of a toolset's variable (`toolshift secrets set`), sealed (lib/identity/sealed.ts). */
  identity_secrets: { user_id: string; toolset: string; name: string; sealed: string; updated_at: string };
  /**
   * A user's OAuth tokens at a toolset's upstream server (sealed JSON: access and refresh token), the scopes
   * granted, when the access token expires (ms), and when the user connected it.
   */
  identity_grants: {
    user_id: string;
    toolset: string;
    sealed: string;
    scopes: string;
    expires_at: NullableInt8;
    updated_at: string;
  };
  /** The gateway's client registration at an upstream's authorization server (sealed JSON), by server URL. */
  identity_oauth_clients: { server: string; sealed: string; created_at: string };
  /** A connection being made: its state's hash, whose, which toolset, its PKCE verifier sealed; used once. */
  identity_oauth_flows: {
    state_hash: string;
    user_id: string;
    toolset: string;
    sealed: string;
    expires_at: Int8;
  };
  /** The emails of users the operator removed: nobody is made a user with one on first sign-in (until added again). */
  identity_removed: { email: string; removed_at: string };
  /** How much of a limit a user or team (`subject`) used in the window that starts at `window_start`. */
  identity_usage: { subject: string; name: string; window_start: Int8; n: Int8 };
}

/** The component whose migrations these are (its table: `identity_migrations`). */
export const IDENTITY_COMPONENT = 'identity';

export function identityMigrations(): Record<string, Migration> {
  return {
    '001_users_keys_teams': { up: usersKeysTeams },
    '002_team_ceiling': {
      up: (db) => db.schema.alterTable('identity_teams').addColumn('disabled_toolsets', 'text').execute(),
    },
    '003_team_policy': {
      up: (db) => db.schema.alterTable('identity_teams').addColumn('policy', 'text').execute(),
    },
    '004_sign_ins': {
      up: (db) =>
        db.schema
          .createTable('identity_sign_ins')
          .ifNotExists()
          .addColumn('issuer', 'text', (c) => c.notNull())
          .addColumn('subject', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('identity_sign_ins_pk', ['issuer', 'subject'])
          .execute(),
    },
    '005_upstream_accounts': { up: upstreamAccounts },
    '006_removed_emails': {
      up: (db) =>
        db.schema
          .createTable('identity_removed')
          .ifNotExists()
          .addColumn('email', 'text', (c) => c.primaryKey())
          .addColumn('removed_at', 'text', (c) => c.notNull())
          .execute(),
    },
  };
}

async function usersKeysTeams(db: Kysely<unknown>): Promise<void> {
  const table = (name: string) => db.schema.createTable(name).ifNotExists();
  await table('identity_users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('email', 'text')
    .addColumn('limits', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await table('identity_teams')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('limits', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await table('identity_members')
    .addColumn('team_id', 'text', (c) => c.notNull().references('identity_teams.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('identity_users.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('identity_members_pk', ['team_id', 'user_id'])
    .execute();
  // A key outlives its user's row (the user removed): found by its id, refused as the key of a removed user.
  await table('identity_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('hash', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('label', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('last_used_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema
    .createIndex('identity_keys_user')
    .ifNotExists()
    .on('identity_keys')
    .column('user_id')
    .execute();
  await table('identity_usage')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('identity_usage_pk', ['subject', 'name', 'window_start'])
    .execute();
}

/** People's own upstream credentials: values they set, OAuth grants, the gateway's clients, flows under way. */
async function upstreamAccounts(db: Kysely<unknown>): Promise<void> {
  const table = (name: string) => db.schema.createTable(name).ifNotExists();
  await table('identity_secrets')
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('toolset', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('sealed', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('identity_secrets_pk', ['user_id', 'toolset', 'name'])
    .execute();
  await table('identity_grants')
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('toolset', 'text', (c) => c.notNull())
    .addColumn('sealed', 'text', (c) => c.notNull())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('identity_grants_pk', ['user_id', 'toolset'])
    .execute();
  await table('identity_oauth_clients')
    .addColumn('server', 'text', (c) => c.primaryKey())
    .addColumn('sealed', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await table('identity_oauth_flows')
    .addColumn('state_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('toolset', 'text', (c) => c.notNull())
    .addColumn('sealed', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
}
