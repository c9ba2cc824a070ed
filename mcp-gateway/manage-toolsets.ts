import { z } from 'zod';
import { describeIssues, HttpError } from '../lib/http.ts';
import type {
  ChangeToolsetsRequest,
  ChangeToolsetsResponse,
  ListToolsetsResponse,
  ManageToolsetsResponse,
} from './contract.ts';
import type { AuditEntry } from './store.ts';

// The manage_toolsets meta-tool, carried out in the gateway for whoever calls it (the agent's loop, and
// the MCP face), so its arguments are judged — and refusals audited — in one place.

const Args = z
  .strictObject({
    action: z.preprocess(
      (v) => (typeof v === 'string' ? v.trim().toUpperCase() : v),
      z.enum(['ACTIVATE', 'DEACTIVATE', 'LIST']),
    ),
    toolset_ids: z.array(z.string()).optional(),
    query: z.string().max(200).optional(),
  })
  .refine((a) => a.action === 'LIST' || (a.toolset_ids?.length ?? 0) > 0, {
    message: 'ACTIVATE and DEACTIVATE need at least one id in toolset_ids',
    path: ['toolset_ids'],
  });

const EXPECTED = 'Expected {action: "ACTIVATE"|"DEACTIVATE"|"LIST", toolset_ids: string[], query?: string}';

/** What the meta-tool needs of the gateway. */
export interface ManageToolsetsDeps {
  listToolsets(sessionId: string, query?: string): ListToolsetsResponse;
  changeToolsets(req: ChangeToolsetsRequest): Promise<ChangeToolsetsResponse>;
  audit(entry: AuditEntry): void;
}

/** Validates a model's raw arguments strictly and runs the action for `sessionId` only. */
export async function manageToolsets(
  deps: ManageToolsetsDeps,
  sessionId: string,
  args: Record<string, unknown>,
): Promise<ManageToolsetsResponse> {
  const parsed = Args.safeParse(args);
  if (!parsed.success) {
    const message = `Invalid arguments for manage_toolsets: ${describeIssues(parsed.error)}. ${EXPECTED}`;
    deps.audit({
      session_id: sessionId,
      kind: 'manage',
      subject: String(args.action ?? '?'),
      ok: false,
      detail: message.slice(0, 500),
    });
    throw new HttpError(400, message);
  }
  const { action, toolset_ids = [], query } = parsed.data;
  if (action === 'LIST') {
    const { toolsets } = deps.listToolsets(sessionId, query);
    const shown = toolsets.filter((t) => t.enabled);
    return {
      result: {
        toolsets: shown.map(({ id, description, active, tools, matched_tools }) => ({
          id,
          description,
          active,
          tools,
          ...(matched_tools ? { matched_tools } : {}),
        })),
        ...(shown.length === 0
          ? { message: `No toolset matches "${query ?? ''}"; LIST without a query shows all.` }
          : {}),
      },
    };
  }
  const res = await deps.changeToolsets({ action, toolset_ids, session_id: sessionId });
  const verb = action === 'ACTIVATE' ? 'Activated' : 'Deactivated';
  const changed = toolset_ids.filter((id) => !res.unchanged.includes(id));
  const parts = [
    changed.length > 0 ? `${verb} ${changed.join(', ')}.` : '',
    res.unchanged.length > 0
      ? `${res.unchanged.join(', ')} ${action === 'ACTIVATE' ? 'was already active' : 'was not active'}.`
      : '',
    res.added_tools.length > 0 ? `New tools: ${res.added_tools.join(', ')}.` : '',
    res.removed_tools.length > 0 ? `Tools no longer available: ${res.removed_tools.join(', ')}.` : '',
  ];
  return {
    result: {
      message: parts.filter(Boolean).join(' '),
      active_toolsets: res.active_toolsets,
      added_tools: res.added_tools,
      removed_tools: res.removed_tools,
    },
    change: {
      action,
      toolset_ids,
      active_toolsets: res.active_toolsets,
      added_tools: res.added_tools,
      removed_tools: res.removed_tools,
    },
  };
}
