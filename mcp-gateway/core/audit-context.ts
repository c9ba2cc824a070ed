import { AsyncLocalStorage } from 'node:async_hooks';

// Who is acting, carried through a request without threading it through every call: the gateway's app sets
// it per request (the operator, the agent for task X, an MCP client), and every audit row records it.

/** The actor of the current request. */
export interface AuditActor {
  /** `admin`, `model in task <id>`, `agent`, `mcp`, `local` … */
  actor: string;
  task_id?: string;
  /** A digest of the caller's credential (its role without tokens): whose call it is, for fair shares. */
  owner?: string;
}

const storage = new AsyncLocalStorage<AuditActor>();

/** Runs `fn` with `actor` as the current actor. */
export function withActor<T>(actor: AuditActor, fn: () => T): T {
  return storage.run(actor, fn);
}

/** The current actor, or `system` outside any request (start-up, upstream notifications). */
export function currentActor(): AuditActor {
  return storage.getStore() ?? { actor: 'system' };
}
