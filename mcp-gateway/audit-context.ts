import { AsyncLocalStorage } from 'node:async_hooks';

/** Who acted: the operator, the model in a task, an MCP client — carried per request, recorded with each audit row. */
export interface AuditActor {
  /** `admin`, `model in task <id>`, `agent`, `mcp`, `local`, `system` … */
  actor: string;
  task_id?: string;
  /** A digest of the caller's credential (its role without tokens): whose call it is, for fair shares. */
  owner?: string;
  /** Whose work the request is (`user:<id>`): a user's key, or the agent acting in a user's task. */
  for_user?: string;
  /** A call a run_code script made: it cannot wait for a human's approval. */
  in_script?: boolean;
  /** An activation the gateway makes because the model called this tool of an inactive toolset. */
  automatic?: string;
  /** Never asks a human: an activation the policy would ask about is refused (automatic ones, goal priming). */
  unasked?: boolean;
}

// Who is acting, carried through a request without threading it through every call: the gateway's app sets
// it per request (the operator, the agent for task X, an MCP client), and the rules hand it to the store with
// every audit row they write (the store takes it as data: it reads nothing of core/).

const storage = new AsyncLocalStorage<AuditActor>();

/** Runs `fn` with `actor` as the current actor. */
export function withActor<T>(actor: AuditActor, fn: () => T): T {
  return storage.run(actor, fn);
}

/** The current actor, or `system` outside any request (start-up, upstream notifications). */
export function currentActor(): AuditActor {
  return storage.getStore() ?? { actor: 'system' };
}
