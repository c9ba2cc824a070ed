import { migrate, postgresDbTracked, type StoreDb, sqliteDb } from '../../lib/db/kysely.ts';
import type { Pool } from '../../lib/db/postgres.ts';
import { StoreUnavailable } from '../../lib/db/reachability.ts';
import type { Db } from '../../lib/db/sqlite.ts';
import { approvalMethods } from './approvals.ts';
import { callMethods } from './calls.ts';
import { claimMethods } from './claims.ts';
import type { StoreContext } from './context.ts';
import { type DialectHooks, postgresHooks, sqliteHooks } from './dialect.ts';
import { eventMethods } from './events.ts';
import type { StoreOptions, TaskOutcome, TaskStore } from './interface.ts';
import { createLeases } from './leases.ts';
import { loginMethods } from './logins.ts';
import { AGENT_COMPONENT, agentMigrations } from './migrations.ts';
import { notifications } from './notifications.ts';
import type { AgentDatabase } from './schema.ts';
import { taskReads } from './task-reads.ts';
import { taskMethods } from './tasks.ts';
import { threadMethods } from './threads.ts';
import { webhookMethods, webhookParts } from './webhooks.ts';
import { createWrites } from './writes.ts';

export type { TaskOutcome, TaskStore };

// The agent-server's tasks and their events, one implementation for both databases over Kysely
// (lib/db/kysely.ts): SQLite's agent.db (the embedded default) or PostgreSQL (DATABASE_URL), shared by every
// worker. What differs between them is behind dialect.ts's hooks; the parts, by concern: tasks.ts, events.ts
// (written behind by writes.ts), calls.ts (checkpoints and call records), approvals.ts (pauses, decisions, the
// queue's rows), logins.ts, claims.ts, notifications.ts, leases.ts; the schema in schema.ts and migrations.ts.

/** Methods that answer at once (the rest wait for the migrations of a store opened synchronously). */
const AT_ONCE = new Set([
  'appendEvent',
  'fenceOf',
  'onLeaseLost',
  'onQueueChange',
  'onTaskEvents',
  'onTaskEnd',
  'onWebhookDue',
]);

/**
 * The SQLite task store on an open handle (lib/db/sqlite.ts openDatabase), at once: its migrations are applied
 * before its first statement, and every method that touches the database waits for them (and meets their
 * failure).
 */
export function createTaskStore(db: Db, opts: StoreOptions = {}): TaskStore {
  const s = sqliteDb<AgentDatabase>(db);
  const ready = migrate(s, AGENT_COMPONENT, agentMigrations(s.dialect)).catch((err: unknown) => {
    throw new Error(`agent-server cannot use its SQLite database (agent.db): ${(err as Error).message}`, {
      cause: err,
    });
  });
  // Observed here; every method waits for it and meets its failure.
  ready.catch(() => undefined);
  const store = storeOn(s, sqliteHooks(s.db, s.sqlite as NonNullable<typeof s.sqlite>), opts);
  const waiting = { ...store } as Record<string, unknown>;
  for (const [name, method] of Object.entries(store)) {
    if (typeof method !== 'function' || AT_ONCE.has(name)) continue;
    waiting[name] = async (...args: unknown[]) => {
      await ready;
      return (method as (...a: unknown[]) => unknown)(...args);
    };
  }
  return waiting as unknown as TaskStore;
}

/** The PostgreSQL task store on `pool` (lib/db/postgres.ts openPostgres), its migrations applied first. */
export async function createPostgresTaskStore(pool: Pool, opts: StoreOptions = {}): Promise<TaskStore> {
  // Each statement notes whether the server was reached (/health, 503 for requests).
  const s = postgresDbTracked<AgentDatabase>(pool);
  try {
    await migrate(s, AGENT_COMPONENT, agentMigrations(s.dialect));
  } catch (err) {
    await s.close().catch(() => undefined);
    // The address is not repeated: DATABASE_URL may carry a password.
    throw new Error(
      `agent-server cannot use its PostgreSQL database (DATABASE_URL): ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  return storeOn(s, postgresHooks(pool), opts);
}

/** The store's methods on an open, migrated database. */
function storeOn(s: StoreDb<AgentDatabase>, hooks: DialectHooks, opts: StoreOptions): TaskStore {
  const { db } = s;
  const onWriteError =
    opts.onWriteError ?? ((err: unknown) => process.emitWarning(`task store write failed: ${err}`));
  let closed = false;
  const leases = createLeases(opts, (held) => hooks.renew(db, held, leases.now() + leases.leaseMs));
  // The database back: the leases first (before the writes that waited for it, and another worker's sweeper).
  const stopRenewingOnReturn = hooks.reach?.onUp(() => {
    // Gone again at once: the heartbeat and the writes that wait renew them when it is back for good.
    leases.renewNow().catch((err: unknown) => {
      if (!(err instanceof StoreUnavailable)) onWriteError(err);
    });
  });
  const writes = createWrites({ db, hooks, leases, opts, onWriteError, closing: () => closed });
  const heard = notifications(db, hooks, leases.holder);
  const reach = hooks.reach;
  const webhooks = webhookParts(db, hooks, leases.now);
  const c: StoreContext = {
    db,
    hooks,
    leases,
    writes,
    opts,
    onWriteError,
    lastSeq: new Map(),
    notifyQueue: heard.notifyQueue,
    webhooks: webhooks.parts,
    guard: (promise) => (reach ? reach.guard(promise) : promise),
  };
  return {
    holder: leases.holder,
    embedded: hooks.embedded,
    fenceOf: (taskId: string) => leases.fence(taskId),
    ...taskMethods(c),
    ...taskReads(c),
    ...threadMethods(c),
    ...eventMethods(c),
    ...callMethods(c),
    ...approvalMethods(c),
    ...claimMethods(c),
    ...loginMethods(db),
    ...webhookMethods(db, hooks, leases, webhooks.listeners),
    ...heard.methods,
    onLeaseLost: (listener) => {
      leases.onLost(listener);
    },
    flush: writes.flush,
    async close() {
      leases.stop();
      stopRenewingOnReturn?.();
      await writes.flush();
      closed = true;
      await heard.stop();
      await s.close();
    },
  };
}
