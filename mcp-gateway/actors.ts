import type { Context } from 'hono';
import { OAUTH_VIA } from '../lib/http/oauth-resource.ts';
import type { Principal } from '../lib/http/security.ts';
import type { AuditActor } from './audit-context.ts';
import { BY_AGENT_HEADER, type LocalCaller, OWNER_HEADER, OWNER_PATTERN, TASK_HEADER } from './contract.ts';

// Who a request is, for the audit trail: the operator, the model in a task, an MCP client, a user. Over HTTP
// the request's principal and headers say it (actorOf); in-process (local.ts) the agent's principal and what
// its headers would have said (callerActor) — one rule for both.

/** The MCP face's routes: all toolsets at /mcp, views at /mcp/toolsets/<ids>. */
const isFacePath = (path: string) => path === '/mcp' || path.startsWith('/mcp/toolsets/');

/** Who an HTTP request is. */
export function actorOf(c: Context): AuditActor {
  const principal = c.get('principal') as Principal | undefined;
  const user = principal && 'user' in principal ? principal.user : undefined;
  if (user) {
    // A person with their own key (named, with the key they used) or signed in to /mcp with an access token.
    const via = user.keyId === OAUTH_VIA ? 'OAuth access token' : `key ${user.keyId}`;
    const who = `user ${user.user.name} (${via})`;
    const own = `user:${user.user.id}`;
    return { actor: isFacePath(c.req.path) ? `mcp client, ${who}` : who, owner: own, for_user: own };
  }
  const by = c.req.header(BY_AGENT_HEADER);
  return callerActor(
    principal,
    {
      task: c.req.header(TASK_HEADER),
      owner: c.req.header(OWNER_HEADER),
      by: by === 'run_code' || by === 'goal priming' ? by : undefined,
    },
    isFacePath(c.req.path),
  );
}

/** Who a caller that is not a person's key is: the agent (acting for a task, perhaps a user's), a service. */
export function callerActor(
  principal: Principal | undefined,
  caller: LocalCaller,
  onFace = false,
): AuditActor {
  const role = principal?.role ?? 'local';
  // The agent says whose task it acts in; nobody else may say whose work theirs is.
  const owner = caller.owner;
  const forUser =
    (role === 'agent' || role === 'local') && owner && OWNER_PATTERN.test(owner) ? owner : undefined;
  return {
    ...actingAs(role, caller, forUser, onFace),
    owner: principal && 'credential' in principal ? principal.credential : role,
    ...(forUser ? { for_user: forUser } : {}),
  };
}

/** Who the request acts as, in the audit's words; `forUser`: whose task it is. */
function actingAs(
  role: string,
  caller: LocalCaller,
  forUser: string | undefined,
  onFace: boolean,
): AuditActor {
  const { task, by } = caller;
  if ((role === 'agent' || role === 'local') && task && /^[A-Za-z0-9_.:-]{1,128}$/.test(task)) {
    const whose = forUser ? ` for ${forUser}` : '';
    if (by === 'run_code')
      return { actor: `model in task ${task}${whose} (run_code)`, task_id: task, in_script: true };
    // The agent acting by itself for the task never leaves an approval waiting: nobody asked for it.
    if (by === 'goal priming')
      return { actor: `agent for task ${task}${whose} (goal priming)`, task_id: task, unasked: true };
    return { actor: `model in task ${task}${whose}`, task_id: task };
  }
  if (onFace) return { actor: `mcp client (${role})` };
  return { actor: role === 'approver' ? 'user (AGENT_API_TOKEN)' : role };
}
