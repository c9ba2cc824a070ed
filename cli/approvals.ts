import { agentRoutes, type PendingApproval } from '../agent-server/contract.ts';
import { callRoute, errorOf, type ServiceEndpoint, ServiceError } from '../lib/http/http-client.ts';
import { type Approval, gatewayRoutes } from '../mcp-gateway/contract.ts';
import { type CliIo, EXIT, UsageError } from './io.ts';

// `toolshift approvals` (what tasks and MCP clients wait for, and the human's yes or no) and `toolshift audit` (the gateway's
// record of who changed what and what was refused).

/** One line describing what a task or an MCP client waits for. */
export function describePending(
  p: Pick<PendingApproval, 'kind' | 'subject' | 'arguments' | 'reason' | 'expires_at'>,
): string {
  const what =
    p.kind === 'activate'
      ? `activate toolset ${p.subject}`
      : `${p.subject} ${JSON.stringify(p.arguments ?? {})}`;
  return `${what} — ${p.reason} (until ${p.expires_at})`;
}

/** Sends a decision on what `taskId` waits for at `callId`. */
export function decide(
  agent: ServiceEndpoint,
  taskId: string,
  callId: string,
  approve: boolean,
  reason?: string,
) {
  return callRoute(agent, agentRoutes.decideApproval, {
    params: { id: taskId, call_id: callId },
    body: { approve, ...(reason ? { reason } : {}) },
  });
}

/** What MCP clients (no task) wait for: the gateway's pending approvals that belong to no task. */
async function clientApprovals(gateway: ServiceEndpoint): Promise<Approval[]> {
  const { approvals } = await callRoute(gateway, gatewayRoutes.listApprovals, {
    query: { status: 'pending', limit: '500' },
  });
  return approvals.filter((a) => a.task_id === null);
}

/**
 * `toolshift approvals [list]` and `toolshift approvals approve|deny <approval_id> | <task_id> <call_id>
 * [--reason TEXT]`: one surface for what tasks wait for (the agent-server) and what MCP clients wait for
 * (the gateway's approvals of sessions without a task, which the client's retried call then uses).
 */
export async function approvalsCommand(
  args: string[],
  flags: { json: boolean; reason?: string },
  endpoints: { agent: ServiceEndpoint; gateway: ServiceEndpoint },
  io: CliIo,
): Promise<number> {
  const { agent, gateway } = endpoints;
  const [sub = 'list', first, second, ...extra] = args;
  if (sub === 'list') {
    const { approvals } = await callRoute(agent, agentRoutes.listApprovals);
    const clients = await clientApprovals(gateway);
    if (flags.json) {
      io.stdout(`${JSON.stringify({ approvals, mcp_clients: clients })}\n`);
      return EXIT.ok;
    }
    if (approvals.length === 0 && clients.length === 0) {
      io.stdout('nothing waits for an approval (no task, no MCP client)\n');
      return EXIT.ok;
    }
    for (const p of approvals) io.stdout(`${p.approval_id}  task ${p.task_id}  ${describePending(p)}\n`);
    for (const a of clients) io.stdout(`${a.id}  MCP session ${a.session_id}  ${describePending(a)}\n`);
    io.stdout('decide: toolshift approvals approve|deny <id> [--reason TEXT]\n');
    return EXIT.ok;
  }
  if (sub !== 'approve' && sub !== 'deny') {
    throw new UsageError(`unknown approvals command "${sub}"; use list, approve or deny`, 'approvals');
  }
  if (!first || extra.length > 0) {
    throw new UsageError(
      `approvals ${sub} needs an approval id (toolshift approvals lists them), or a task id and a call id`,
      'approvals',
    );
  }
  const approve = sub === 'approve';
  if (second) {
    const res = await decide(agent, first, second, approve, flags.reason);
    if (flags.json) io.stdout(`${JSON.stringify(res)}\n`);
    else io.stdout(`${res.status}${decidedBy(res)}: task ${first} goes on\n`);
    return EXIT.ok;
  }
  // An approval id: a task's is decided through the agent-server (the task hears of it and goes on), an MCP
  // client's through the gateway (the client's next identical call is let through, once).
  const { approvals } = await callRoute(agent, agentRoutes.listApprovals);
  const task = approvals.find((p) => p.approval_id === first);
  if (task) {
    const res = await decide(agent, task.task_id, task.call_id, approve, flags.reason);
    if (flags.json) io.stdout(`${JSON.stringify(res)}\n`);
    else io.stdout(`${res.status}${decidedBy(res)}: task ${task.task_id} goes on\n`);
    return EXIT.ok;
  }
  let decided: Approval;
  try {
    decided = await callRoute(gateway, gatewayRoutes.decideApproval, {
      params: { id: first },
      body: { approve, ...(flags.reason ? { reason: flags.reason } : {}) },
    });
  } catch (err) {
    if (err instanceof ServiceError && err.status === 404) {
      throw new Error(`no pending approval ${first}; toolshift approvals lists them`);
    }
    throw err;
  }
  if (flags.json) io.stdout(`${JSON.stringify(decided)}\n`);
  else {
    io.stdout(
      `${decided.status}${decidedBy(decided)}: ${describePending(decided)}\n` +
        (approve ? '  the MCP client gets it when it sends the same call again\n' : ''),
    );
  }
  return EXIT.ok;
}

/** ` by <who>` for a decision that records who took it. */
function decidedBy(d: { decided_by?: string | null }): string {
  return d.decided_by ? ` by ${d.decided_by}` : '';
}

/** What `toolshift audit` searches by (each exact), as the gateway's audit listing takes them. */
export interface AuditFlags {
  session?: string;
  task?: string;
  since?: string;
  until?: string;
  actor?: string;
  kind?: string;
  toolset?: string;
  tool?: string;
  outcome?: string;
}

/**
 * `toolshift audit [filters] [--limit N] [--cursor C] [--json | --jsonl]`: the gateway's audit trail, a page at a
 * time (the last line says how to ask for the next, older page); `--jsonl` streams every matching row.
 */
export async function auditCommand(
  flags: AuditFlags & { json: boolean; jsonl?: boolean; cursor?: string; limit: number },
  gateway: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const search = {
    session_id: flags.session,
    task_id: flags.task,
    since: flags.since,
    until: flags.until,
    actor: flags.actor,
    kind: flags.kind,
    toolset: flags.toolset,
    tool: flags.tool,
    outcome: flags.outcome,
  };
  if (flags.jsonl) return exportAudit(search, gateway, io);
  const { audit, next_cursor } = await callRoute(gateway, gatewayRoutes.listAudit, {
    query: { ...search, cursor: flags.cursor, limit: String(flags.limit) },
  });
  if (flags.json) {
    io.stdout(`${JSON.stringify({ audit, next_cursor })}\n`);
    return EXIT.ok;
  }
  if (audit.length === 0) io.stdout('no audit rows match\n');
  for (const r of [...audit].reverse()) {
    const outcome = r.ok ? 'ok' : 'REFUSED';
    io.stdout(
      `${r.at}  ${outcome.padEnd(7)} ${r.kind.padEnd(10)} ${r.subject}  by ${r.actor}` +
        `${r.session_id ? ` in ${r.session_id}` : ''}${r.detail ? `  — ${r.detail}` : ''}\n`,
    );
  }
  if (next_cursor) io.stdout(`older rows: toolshift audit --cursor ${next_cursor} (with the same filters)\n`);
  return EXIT.ok;
}

/** Every matching row as JSON lines on stdout, as the gateway streams them (`toolshift audit --jsonl > audit.jsonl`). */
async function exportAudit(
  search: Record<string, string | undefined>,
  gateway: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const query = new URLSearchParams(
    Object.entries(search).filter((e): e is [string, string] => e[1] !== undefined),
  ).toString();
  const doFetch = gateway.fetch ?? fetch;
  const res = await doFetch(
    `${gateway.baseUrl}${gatewayRoutes.exportAudit.path}${query ? `?${query}` : ''}`,
    {
      headers: gateway.headers,
    },
  );
  if (!res.ok || !res.body) throw await errorOf(res);
  const decoder = new TextDecoder();
  for await (const chunk of res.body) io.stdout(decoder.decode(chunk, { stream: true }));
  return EXIT.ok;
}
