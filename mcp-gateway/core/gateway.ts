import { serialiser } from '../../lib/db/serialiser.ts';
import type { Logger } from '../../lib/telemetry/log.ts';
import { createTokenCounter, type TokenCounter } from '../../lib/telemetry/tokens.ts';
import { currentActor } from '../audit-context.ts';
import type { Catalog } from '../catalog/catalog.ts';
import type { Ceiling } from '../ceiling/ceiling.ts';
import type {
  ChangeDefaultsRequest,
  ChangeToolsetsRequest,
  GatewayTool,
  ListToolsetsResponse,
} from '../contract.ts';
import { DEFAULT_SESSION, manageToolsetsDefinition } from '../contract.ts';
import type { CallKeyQueries, GatewayStore } from '../store/interface.ts';
import { auditSearch } from './audit-search.ts';
import { callTool } from './call-tool.ts';
import { changeDefaults } from './change-defaults.ts';
import { changeToolsets } from './change-toolsets.ts';
import type { Gateway } from './interface.ts';
import { listing } from './listing.ts';
import { manageToolsets, type ToolTokens } from './manage-toolsets.ts';
import { operatorActions } from './operator.ts';
import type { GatewayCore } from './parts.ts';
import {
  active,
  definitionTokens,
  namedTokens,
  prepare,
  toolsetTools,
  unlisted,
  validIds,
} from './session-toolsets.ts';
import { fixedViews } from './views.ts';

export type { Gateway };

/**
 * Session state, the operator ceiling, and enforcement of "only active tools may be called". Each rule is load →
 * decide → persist: one read of what the request needs (`store.load`: the session's toolsets, the disabled set,
 * the defaults), the decision made on it without the database, and one short transaction (or conditional
 * statement) that persists it; audit rows are queued and written in batches. The rules live beside this file,
 * each a function of what they share (GatewayCore, parts.ts).
 */
export function createGateway(deps: {
  catalog: Catalog;
  store: GatewayStore;
  log: Logger;
  /** Counts tool-definition tokens for manage_toolsets results and the budget (default o200k_base). */
  tokens?: TokenCounter;
  /** TOOL_TOKEN_BUDGET: the most tool-definition tokens manage_toolsets may bring a session to. */
  toolTokenBudget?: number;
  /** The operator's policy, approvals and rate limits (ceiling.ts), checked on every path. */
  ceiling: Ceiling;
  /** The record of keyed calls and tasks' fences (store/call-keys.ts); without it keys are not honoured. */
  callKeys?: CallKeyQueries;
  /** The toolsets user `forUser`'s teams disabled (lib/identity), each with the team; absent: no teams' ceilings. */
  teamCeiling?: (forUser: string) => Promise<ReadonlyMap<string, string>>;
  /** AUTO_ACTIVATE: a call of a tool of an inactive toolset activates it first (default true). */
  autoActivate?: boolean;
}): Gateway {
  const { catalog, store, log, ceiling, callKeys } = deps;
  const c: GatewayCore = {
    catalog,
    store,
    log,
    ceiling,
    callKeys,
    counter: deps.tokens ?? createTokenCounter(),
    /** Audits with the request's actor (audit-context.ts). */
    audit: (entry) => store.audit(entry, currentActor()),
    async teamDisabled() {
      const forUser = currentActor().for_user;
      return forUser && deps.teamCeiling ? deps.teamCeiling(forUser) : new Map();
    },
  };
  const api = {
    async listToolsets(sessionId = DEFAULT_SESSION, query?: string): Promise<ListToolsetsResponse> {
      return listing(c, sessionId, await store.load(sessionId), query);
    },
    changeToolsets: (req: ChangeToolsetsRequest) => changeToolsets(c, req),
    changeDefaults: (req: ChangeDefaultsRequest) => changeDefaults(c, req),
    /** The session's tools, from one read of it: its active toolsets not listed yet are listed first. */
    async tools(sessionId = DEFAULT_SESSION): Promise<GatewayTool[]> {
      const view = await store.load(sessionId);
      // Not one that was down when last tried: a listing must not wait for it on every request.
      const waiting = active(c, view).filter((id) => unlisted(c, id));
      if (waiting.length > 0) {
        await catalog.prepare(waiting).catch((err: Error) => {
          log.warn({ session: sessionId, toolsets: waiting, err: err.message }, 'active toolset not ready');
        });
      }
      // Not those the user's team may not use: they would only be refused.
      const byTeam = await c.teamDisabled();
      return active(c, view)
        .filter((id) => !byTeam.has(id))
        .flatMap((toolsetId) => toolsetTools(c, toolsetId, view.only) ?? []);
    },
    toolsetTools: (toolsetId: string) => toolsetTools(c, toolsetId),
    callTool: (...args: Parameters<Gateway['callTool']>) => callTool(c, ...args),
  };
  const oneAtATime = serialiser();
  /**
   * The manage_toolsets meta-tool with a model's raw arguments, for the agent's loop and the MCP face. A
   * session's changes run one at a time: two parallel ACTIVATE calls each judged against the same "before"
   * once both passed TOOL_TOKEN_BUDGET together (3,767 tokens against 3,500).
   */
  const manage = (sessionId: string, args: Record<string, unknown>) =>
    oneAtATime(sessionId, () =>
      manageToolsets(
        { ...api, audit: c.audit, toolTokens: toolTokensOf(c, deps.toolTokenBudget) },
        sessionId,
        args,
      ),
    );
  if (deps.autoActivate !== false) {
    c.activate = async (sessionId, toolsetId, tools) => {
      const res = await manage(sessionId, {
        action: 'ACTIVATE',
        toolset_ids: [toolsetId],
        ...(tools ? { tools } : {}),
      });
      return { ...res, tools: await api.tools(sessionId) };
    };
  }
  const ops = { ...c, listToolsets: api.listToolsets, validIds: () => validIds(c) };
  return {
    ...api,
    ...fixedViews(ops),
    ...operatorActions(ops),
    ...auditSearch(catalog, store),
    /** The upstream server behind an MCP-backed toolset, if it is one. */
    upstream: (toolsetId: string) => catalog.upstream(toolsetId),
    /** Deletes a session that ended (a legacy MCP session closed) with its active toolsets and its limits' counters. */
    async endSession(sessionId: string): Promise<void> {
      ceiling.forgetSession(sessionId);
      await store.dropSessions([sessionId]);
    },
    /** Upstream MCP servers and their state, for /health. */
    upstreams: () => catalog.upstreams(),
    /** A worker took `taskId` over under `fence`: calls under a lower one are refused from now. */
    announceFence: async (taskId: string, fence: number): Promise<number> =>
      callKeys ? callKeys.announce(taskId, fence, Date.now()) : fence,
    /** The operator's ceiling: policy, approvals, limits (ceiling.ts). */
    ceiling,
    /** Calls `listener` with the ids of toolsets whose tools changed (upstream list_changed, approvals, reloads). */
    onCatalogChange: (listener: (ids: string[]) => void) => catalog.onChange(listener),
    manageToolsets: manage,
  };
}

/** What manage_toolsets counts tool-definition tokens with, and the budget it holds a session to. */
function toolTokensOf(c: GatewayCore, budget: number | undefined): ToolTokens {
  return {
    of: (ids, only) => definitionTokens(c, ids, only),
    named: (names) => namedTokens(c, names),
    prepare: (sid, ids) =>
      prepare(
        c,
        sid,
        ids.filter((id) => c.catalog.toolset(id)),
      ),
    base: c.counter.tool(manageToolsetsDefinition),
    budget,
    tokenizer: c.counter.name,
  };
}
