import { z } from 'zod';
import { describeIssues } from '../../lib/http/issues.ts';
import { boundedList, boundedString, LIMITS } from '../../lib/http/limits.ts';
import type {
  ChangeToolsetsRequest,
  ChangeToolsetsResponse,
  ListToolsetsResponse,
  ManageToolsetsResponse,
} from '../contract.ts';
import { Refusal } from '../refusals.ts';
import type { AuditEntry } from '../store/audit.ts';

// The manage_toolsets meta-tool, carried out in the gateway for whoever calls it (the agent's loop, and
// the MCP face), so its arguments are judged — and refusals audited — in one place.

const Args = z
  .strictObject({
    action: z.preprocess(
      (v) => (typeof v === 'string' ? v.trim().toUpperCase() : v),
      z.enum(['ACTIVATE', 'DEACTIVATE', 'LIST']),
    ),
    toolset_ids: boundedList(boundedString(LIMITS.id), LIMITS.ids).optional(),
    query: boundedString(LIMITS.query).optional(),
    tools: boundedList(boundedString(LIMITS.id), LIMITS.ids)
      .refine((t) => t.length > 0, 'name at least one tool, or leave tools out to activate all of them')
      .optional(),
  })
  .refine((a) => a.action === 'LIST' || (a.toolset_ids?.length ?? 0) > 0, {
    message: 'ACTIVATE and DEACTIVATE need at least one id in toolset_ids',
    path: ['toolset_ids'],
  })
  .refine((a) => a.action === 'ACTIVATE' || a.tools === undefined, {
    message: 'only ACTIVATE takes tools (DEACTIVATE removes a toolset with all its tools)',
    path: ['tools'],
  });

/** Whether a model's raw arguments would pass (the MCP face mints a session handle only for those that do). */
export const validManageArgs = (args: Record<string, unknown>): boolean => Args.safeParse(args).success;

const EXPECTED =
  'Expected {action: "ACTIVATE"|"DEACTIVATE"|"LIST", toolset_ids: string[], query?: string, tools?: string[]}';

/** What the model's tools array costs in tokens, and the most a session may carry (TOOL_TOKEN_BUDGET). */
export interface ToolTokens {
  /**
   * Tokens of the named toolsets' tool definitions as the model receives them (those listed so far); with
   * `only`, of the tools it names for a toolset.
   */
  of(toolsetIds: readonly string[], only?: ReadonlyMap<string, readonly string[]>): number;
  /** Tokens of these tools' definitions. */
  named(tools: readonly string[]): number;
  /** Connects upstream toolsets not listed yet, so their definitions can be counted before activating them. */
  prepare?(sessionId: string, toolsetIds: readonly string[]): Promise<void>;
  /** The meta-tool's own definition, part of every request. */
  base: number;
  budget?: number;
  tokenizer: string;
}

/** What the meta-tool needs of the gateway. */
export interface ManageToolsetsDeps {
  listToolsets(sessionId: string, query?: string): Promise<ListToolsetsResponse>;
  changeToolsets(req: ChangeToolsetsRequest): Promise<ChangeToolsetsResponse>;
  audit(entry: AuditEntry): void;
  toolTokens?: ToolTokens;
}

/** 12,345 — one formatter: toLocaleString() builds a new one each call, about 0.1 ms. */
const fmt = new Intl.NumberFormat('en-US').format;

/**
 * The session's partly active toolsets after an ACTIVATE of `ids` with `tools`, as the store will keep them
 * (store/sessions.ts addToolsets): a toolset active in full stays so; one active in part gets the tools named
 * added, or becomes whole without `tools`; a new one gets the tools named, or all of them.
 */
function onlyAfter(
  active: readonly string[],
  before: ReadonlyMap<string, readonly string[]>,
  ids: readonly string[],
  tools: readonly string[] | undefined,
): Map<string, readonly string[]> {
  const after = new Map(before);
  for (const id of ids) {
    const some = before.get(id);
    if (active.includes(id) && !some) continue;
    if (!tools) after.delete(id);
    else after.set(id, [...new Set([...(some ?? []), ...tools])]);
  }
  return after;
}

/**
 * Refuses an activation that would take the session's tool definitions over the budget — a toolset added, or
 * one active in part given more of its tools — naming the active toolsets to deactivate first (largest first,
 * as few as fit). A change that brings no more tokens is never refused.
 */
async function checkBudget(
  deps: ManageToolsetsDeps & { toolTokens: ToolTokens & { budget: number } },
  sessionId: string,
  active: readonly string[],
  ids: readonly string[],
  before: ReadonlyMap<string, readonly string[]>,
  tools: readonly string[] | undefined,
): Promise<void> {
  const { toolTokens: t } = deps;
  await t.prepare?.(
    sessionId,
    ids.filter((id) => !active.includes(id)),
  );
  const only = onlyAfter(active, before, ids, tools);
  const now = (id: string) => (active.includes(id) ? t.of([id], before) : 0);
  const adding = ids.filter((id) => t.of([id], only) > now(id));
  if (adding.length === 0) return;
  const total = t.base + t.of([...new Set([...active, ...ids])], only);
  if (total <= t.budget) return;
  const needed = t.base + t.of(adding, only);
  let message: string;
  if (needed > t.budget) {
    message =
      `${adding.join(', ')} alone would bring the tool definitions to ${fmt(needed)} tokens, over ` +
      `TOOL_TOKEN_BUDGET (${fmt(t.budget)}): ${adding.length > 1 ? 'activate fewer at once' : 'it cannot be activated'}.`;
  } else {
    const others = active.filter((id) => !ids.includes(id)).map((id) => ({ id, tokens: t.of([id], before) }));
    others.sort((a, b) => b.tokens - a.tokens);
    const drop: typeof others = [];
    let left = total;
    for (const o of others) {
      if (left <= t.budget) break;
      drop.push(o);
      left -= o.tokens;
    }
    message =
      `Activating ${adding.join(', ')} would bring the tool definitions to ${fmt(total)} tokens, over ` +
      `TOOL_TOKEN_BUDGET (${fmt(t.budget)}). Deactivate ${drop.map((o) => `${o.id} (${fmt(o.tokens)} tokens)`).join(', ')} ` +
      `first, then activate ${adding.join(', ')}.`;
  }
  deps.audit({
    session_id: sessionId,
    kind: 'activate',
    subject: ids.join(','),
    ok: false,
    detail: `over budget: ${message}`.slice(0, 500),
  });
  throw new Refusal('over_budget', message);
}

/** Validates a model's raw arguments strictly and runs the action for `sessionId` only. */
export async function manageToolsets(
  deps: ManageToolsetsDeps,
  sessionId: string,
  args: Record<string, unknown>,
): Promise<ManageToolsetsResponse> {
  const { action, toolset_ids = [], query, tools } = parseArgs(deps, sessionId, args);
  if (action === 'LIST') return list(deps, sessionId, query);
  const tokens = deps.toolTokens;
  const listing = (await deps.listToolsets(sessionId)).toolsets;
  const activeBefore = listing.filter((t) => t.active).map((t) => t.id);
  const onlyBefore = new Map(
    listing.flatMap((t) => (t.active_tools ? [[t.id, t.active_tools] as const] : [])),
  );
  // Unknown or disabled ids are refused by changeToolsets with their own message; the budget judges the rest.
  const allowed = toolset_ids.every((id) => listing.some((t) => t.id === id && t.enabled));
  if (action === 'ACTIVATE' && tokens?.budget !== undefined && allowed) {
    await checkBudget(
      { ...deps, toolTokens: { ...tokens, budget: tokens.budget } },
      sessionId,
      activeBefore,
      toolset_ids,
      onlyBefore,
      tools,
    );
  }
  const before = tokens ? tokens.base + tokens.of(activeBefore, onlyBefore) : 0;
  const res = await deps.changeToolsets({
    action,
    toolset_ids,
    session_id: sessionId,
    ...(tools ? { tools } : {}),
  });
  const after = tokens ? tokens.base + tokens.named(res.tools) : 0;
  return {
    result: {
      message: changeMessage(action, toolset_ids, res, tokens, after - before, after),
      active_toolsets: res.active_toolsets,
      added_tools: res.added_tools,
      removed_tools: res.removed_tools,
      ...(tokens
        ? {
            tool_definition_tokens: {
              change: after - before,
              total: after,
              ...(tokens.budget !== undefined ? { budget: tokens.budget } : {}),
              tokenizer: tokens.tokenizer,
            },
          }
        : {}),
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

/** The arguments checked strictly; refused (and audited) with what was wrong and what is expected. */
function parseArgs(deps: ManageToolsetsDeps, sessionId: string, args: Record<string, unknown>) {
  const parsed = Args.safeParse(args);
  if (parsed.success) return parsed.data;
  const message = `Invalid arguments for manage_toolsets: ${describeIssues(parsed.error)}. ${EXPECTED}`;
  deps.audit({
    session_id: sessionId,
    kind: 'manage',
    subject: String(args.action ?? '?').slice(0, LIMITS.id),
    ok: false,
    detail: message.slice(0, 500),
  });
  throw new Refusal('invalid_arguments', message);
}

/** LIST: the enabled toolsets, ranked by `query` when one is given. */
async function list(
  deps: ManageToolsetsDeps,
  sessionId: string,
  query?: string,
): Promise<ManageToolsetsResponse> {
  const { toolsets } = await deps.listToolsets(sessionId, query);
  const shown = toolsets.filter((t) => t.enabled);
  // What discovery learns from (store/learned-keywords.ts): the query, then what the task activates and calls.
  if (query !== undefined && query.trim() !== '')
    deps.audit({ session_id: sessionId, kind: 'list', subject: query.slice(0, LIMITS.query), ok: true });
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

/** What an ACTIVATE or DEACTIVATE did, in words for the model: toolsets, tools, and what the tools now cost. */
function changeMessage(
  action: 'ACTIVATE' | 'DEACTIVATE',
  ids: readonly string[],
  res: ChangeToolsetsResponse,
  tokens: ToolTokens | undefined,
  delta: number,
  after: number,
): string {
  const verb = action === 'ACTIVATE' ? 'Activated' : 'Deactivated';
  const changed = ids.filter((id) => !res.unchanged.includes(id));
  const parts = [
    changed.length > 0 ? `${verb} ${changed.join(', ')}.` : '',
    res.unchanged.length > 0
      ? `${res.unchanged.join(', ')} ${action === 'ACTIVATE' ? 'was already active' : 'was not active'}.`
      : '',
    res.added_tools.length > 0 ? `New tools: ${res.added_tools.join(', ')}.` : '',
    res.removed_tools.length > 0 ? `Tools no longer available: ${res.removed_tools.join(', ')}.` : '',
    tokens
      ? `Tool definitions: ${delta >= 0 ? '+' : '−'}${fmt(Math.abs(delta))} tokens, ${fmt(after)} in all` +
        (tokens.budget !== undefined ? ` (budget ${fmt(tokens.budget)}).` : '.')
      : '',
  ];
  return parts.filter(Boolean).join(' ');
}
