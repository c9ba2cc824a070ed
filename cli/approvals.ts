import { agentRoutes, type PendingApproval } from '../agent-server/contract.ts';
import { callRoute, type ServiceEndpoint } from '../lib/http-client.ts';
import { gatewayRoutes } from '../mcp-gateway/contract.ts';
import { type CliIo, EXIT, UsageError } from './io.ts';

// `toolshift approvals` (what tasks wait for, and the human's yes or no) and `toolshift audit` (the gateway's
// record of who changed what and what was refused).

/** One line describing what a task waits for. */
export function describePending(p: PendingApproval): string {
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

/** `toolshift approvals [list]` and `toolshift approvals approve|deny <task_id> <call_id> [--reason TEXT]`. */
export async function approvalsCommand(
  args: string[],
  flags: { json: boolean; reason?: string },
  agent: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const [sub = 'list', taskId, callId] = args;
  if (sub === 'list') {
    const { approvals } = await callRoute(agent, agentRoutes.listApprovals);
    if (flags.json) io.stdout(`${JSON.stringify({ approvals })}\n`);
    else if (approvals.length === 0) io.stdout('no task is waiting for an approval\n');
    else for (const p of approvals) io.stdout(`${p.task_id} ${p.call_id}  ${describePending(p)}\n`);
    return EXIT.ok;
  }
  if (sub !== 'approve' && sub !== 'deny') {
    throw new UsageError(`unknown approvals command "${sub}"; use list, approve or deny`, 'approvals');
  }
  if (!taskId || !callId) {
    throw new UsageError(
      `approvals ${sub} needs a task id and a call id (toolshift approvals lists them)`,
      'approvals',
    );
  }
  const res = await decide(agent, taskId, callId, sub === 'approve', flags.reason);
  if (flags.json) io.stdout(`${JSON.stringify(res)}\n`);
  else io.stdout(`${res.status}: task ${taskId} goes on\n`);
  return EXIT.ok;
}

/**
 * `toolshift audit [--session ID] [--task ID] [--since ISO] [--limit N] [--cursor C]`: the gateway's audit
 * trail, a page at a time (the last line says how to ask for the next, older page).
 */
export async function auditCommand(
  flags: { json: boolean; session?: string; task?: string; since?: string; cursor?: string; limit: number },
  gateway: ServiceEndpoint,
  io: CliIo,
): Promise<number> {
  const { audit, next_cursor } = await callRoute(gateway, gatewayRoutes.listAudit, {
    query: {
      session_id: flags.session,
      task_id: flags.task,
      since: flags.since,
      cursor: flags.cursor,
      limit: String(flags.limit),
    },
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
