import { serialiser } from '../../lib/db/serialiser.ts';
import type { Logger } from '../../lib/telemetry/log.ts';
import { createTokenCounter, type TokenCounter } from '../../lib/telemetry/tokens.ts';
import { trace } from '../../lib/telemetry/tracing.ts';
import { currentActor } from '../audit-context.ts';
import { UpstreamError } from '../backends/mcp-connection.ts';
import { type Catalog, CatalogError } from '../catalog/catalog.ts';
import type { Ceiling } from '../ceiling/ceiling.ts';
import type {
  AuditSearch as AuditSearchQuery,
  ChangeDefaultsRequest,
  ChangeDefaultsResponse,
  ChangeToolsetsRequest,
  ChangeToolsetsResponse,
  GatewayTool,
  ListToolsetsResponse,
  ToolResult,
} from '../contract.ts';
import { AUDIT_PAGE_MAX, DEFAULT_SESSION, manageToolsetsDefinition, type RefusalCode } from '../contract.ts';
import { Refusal } from '../refusals.ts';
import type { AuditEntry, AuditFilter, AuditRow } from '../store/audit.ts';
import type { CallKeyQueries, GatewayStore, SessionView } from '../store/interface.ts';
import { describeParameters, describeValidationErrors } from './describe-schema.ts';
import type { Gateway } from './interface.ts';
import { type CallIdentity, callBackend, keyedCall } from './keyed-calls.ts';
import { manageToolsets } from './manage-toolsets.ts';
import { operatorActions } from './operator.ts';
import { fixedViews } from './views.ts';

export type { Gateway };

/**
 * Session state, the operator ceiling, and enforcement of "only active tools may be called". Each rule is load →
 * decide → persist: one read of what the request needs (`store.load`: the session's toolsets, the disabled set,
 * the defaults), the decision made on it without the database, and one short transaction (or conditional
 * statement) that persists it; audit rows are queued and written in batches.
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
}): Gateway {
  const { catalog, store, log } = deps;
  const counter = deps.tokens ?? createTokenCounter();
  /** Tokens of the toolsets' tool definitions known so far (an upstream toolset not yet listed counts 0). */
  const definitionTokens = (ids: readonly string[]) =>
    counter.tools(
      ids.flatMap((id) =>
        (catalog.toolset(id)?.tools ?? []).flatMap((name) => {
          const tool = catalog.tools.get(name);
          return tool ? [tool.definition] : [];
        }),
      ),
    );
  const validIds = () => catalog.toolsets.map((t) => t.id).join(', ');
  /** Audits with the request's actor (audit-context.ts). */
  const audit = (entry: AuditEntry) => store.audit(entry, currentActor());

  /** What a new session starts with: the files' `default` toolsets as the user changed them (changeDefaults). */
  const defaults = (view: Pick<SessionView, 'overrides'>) =>
    catalog.toolsets.filter((t) => view.overrides.get(t.id) ?? t.default).map((t) => t.id);

  /**
   * The session's active toolsets that still exist and are enabled, in activation order. A session that was
   * never changed is not stored: reading one does not create it, it simply has the default toolsets.
   */
  function active(view: SessionView): string[] {
    const ids = view.toolsets ?? defaults(view);
    return ids.filter((id) => catalog.toolset(id) && !view.disabled.has(id));
  }

  function toolNames(toolsetIds: readonly string[]): string[] {
    return toolsetIds.flatMap((id) => catalog.toolset(id)?.tools ?? []);
  }

  function requireKnown(sessionId: string | null, kind: AuditEntry['kind'], ids: readonly string[]) {
    const unknown = ids.filter((id) => !catalog.toolset(id));
    if (unknown.length > 0) {
      audit({
        session_id: sessionId,
        kind,
        subject: ids.join(','),
        ok: false,
        detail: `unknown: ${unknown.join(',')}`,
      });
      throw new Refusal(
        'unknown_toolset',
        `Unknown toolset id(s): ${unknown.join(', ')}. Valid ids: ${validIds()}`,
        {
          valid_ids: catalog.toolsets.map((t) => t.id),
        },
      );
    }
  }

  /**
   * An upstream toolset whose server has not listed its tools yet (they are unknown, not none): not started
   * (`idle`), or, with `orDown`, one that could not be reached when last tried.
   */
  const unlisted = (id: string, orDown = false) => {
    const health = catalog.status(id)?.health;
    return (
      (catalog.toolset(id)?.tools.length ?? 0) === 0 && (health === 'idle' || (orDown && health === 'down'))
    );
  };

  /** Connects the upstream servers of toolsets about to be activated; a server that cannot serve refuses the activation. */
  async function prepare(sessionId: string | null, ids: readonly string[]) {
    try {
      await catalog.prepare(ids);
    } catch (err) {
      if (!(err instanceof UpstreamError || err instanceof CatalogError)) throw err;
      const message = `Cannot activate ${ids.join(', ')}: ${err.message}`;
      audit({
        session_id: sessionId,
        kind: 'activate',
        subject: ids.join(','),
        ok: false,
        detail: message,
      });
      throw new Refusal(err instanceof UpstreamError ? 'upstream_failed' : 'unavailable', message);
    }
  }

  /** The catalog as listed for a session: each toolset's state in it; ranked by `query` when one is given. */
  function listing(sessionId: string, view: SessionView, query?: string): ListToolsetsResponse {
    const on = new Set(active(view));
    const starting = new Set(defaults(view));
    const info = (t: (typeof catalog.toolsets)[number], matched?: string[], certain?: boolean) => ({
      id: t.id,
      description: t.description,
      tools: t.tools,
      enabled: !view.disabled.has(t.id),
      active: on.has(t.id),
      default: starting.has(t.id),
      ...catalog.status(t.id),
      ...(t.tools.length > 0 ? { definition_tokens: definitionTokens([t.id]) } : {}),
      ...(matched ? { matched_tools: matched } : {}),
      ...(certain ? { certain } : {}),
    });
    // With a query: ranked by the search index (search.ts), best first, each with the tools that matched.
    const toolsets = query?.trim()
      ? catalog.search(query).flatMap((hit) => {
          const t = catalog.toolset(hit.id);
          // Certain means an agent may activate it unasked: not when the operator's policy asks or denies.
          const certain = hit.certain && deps.ceiling.activationFree(hit.id);
          return t ? [info(t, hit.matched_tools, certain)] : [];
        })
      : catalog.toolsets.map((t) => info(t));
    return { session_id: sessionId, toolsets };
  }

  /** The tools of the session's active toolsets. */
  const toolsOf = (view: SessionView) =>
    active(view).flatMap((toolsetId) => api.toolsetTools(toolsetId) ?? []);

  const api = {
    async listToolsets(sessionId = DEFAULT_SESSION, query?: string): Promise<ListToolsetsResponse> {
      return listing(sessionId, await store.load(sessionId), query);
    },

    async changeToolsets(req: ChangeToolsetsRequest): Promise<ChangeToolsetsResponse> {
      const sessionId = req.session_id ?? DEFAULT_SESSION;
      const ids = [...new Set(req.toolset_ids)];
      requireKnown(sessionId, lower(req.action), ids);
      const view = await store.load(sessionId);
      const before = active(view);
      // Taken now: activating a toolset whose server had not listed its tools lists them (they are new).
      const beforeTools = toolNames(before);
      let changed: string[];
      let after: string[];
      if (req.action === 'ACTIVATE') {
        const disabled = ids.filter((id) => view.disabled.has(id));
        if (disabled.length > 0) {
          audit({
            session_id: sessionId,
            kind: 'activate',
            subject: ids.join(','),
            ok: false,
            detail: 'disabled',
          });
          throw new Refusal(
            'disabled',
            `Toolset(s) disabled by the operator: ${disabled.join(', ')}; they cannot be activated`,
          );
        }
        const fresh = ids.filter((id) => !before.includes(id));
        if (fresh.length > 0) await deps.ceiling.checkActivation(sessionId, fresh);
        // Also one already active (a default) whose server has not listed its tools: activating it lists them.
        await prepare(
          sessionId,
          ids.filter((id) => !before.includes(id) || unlisted(id, true)),
        );
        // A session never stored starts from what it had: the defaults.
        const done = await store.activate(sessionId, ids, before);
        changed = done.changed;
        after = active({ ...view, toolsets: done.toolsets });
      } else if (req.action === 'DEACTIVATE') {
        const done = await store.deactivate(sessionId, ids, before);
        changed = done.changed;
        after = active({ ...view, toolsets: done.toolsets });
      } else {
        const enable = req.action === 'ENABLE';
        changed = ids.filter((id) => view.disabled.has(id) === enable);
        if (changed.length > 0) await store.setEnabled(changed, enable);
        const disabled = new Set(view.disabled);
        for (const id of changed) {
          if (enable) disabled.delete(id);
          else disabled.add(id);
        }
        // Disabling removes the toolset from every session, this one included.
        const toolsets =
          view.toolsets && (enable ? view.toolsets : view.toolsets.filter((id) => !changed.includes(id)));
        after = active({ ...view, toolsets, disabled });
      }
      audit({ session_id: sessionId, kind: lower(req.action), subject: ids.join(','), ok: true });
      const afterTools = toolNames(after);
      log.info({ session: sessionId, action: req.action, ids, active: after }, 'toolsets changed');
      return {
        session_id: sessionId,
        active_toolsets: after,
        tools: afterTools,
        added_tools: afterTools.filter((t) => !beforeTools.includes(t)),
        removed_tools: beforeTools.filter((t) => !afterTools.includes(t)),
        unchanged: ids.filter((id) => !changed.includes(id)),
      };
    },

    /**
     * Changes which toolsets new sessions start with (a user's "always give my tasks these"); sessions that
     * never changed their toolsets follow it too, the others keep theirs.
     */
    async changeDefaults(req: ChangeDefaultsRequest): Promise<ChangeDefaultsResponse> {
      const ids = [...new Set(req.toolset_ids)];
      requireKnown(null, 'default', ids);
      const activate = req.action === 'ACTIVATE';
      const view = await store.load(null);
      const disabled = ids.filter((id) => view.disabled.has(id));
      if (activate && disabled.length > 0) {
        audit({
          session_id: null,
          kind: 'default',
          subject: ids.join(','),
          ok: false,
          detail: 'disabled',
        });
        throw new Refusal(
          'disabled',
          `Toolset(s) disabled by the operator: ${disabled.join(', ')}; enable them first (action ENABLE)`,
        );
      }
      // A new default is started and listed now, so every session that has it is offered its tools; one whose
      // server cannot start is refused, as an activation would be.
      if (activate) await prepare(null, ids);
      const before = defaults(view);
      await store.setDefaults(ids, activate);
      const overrides = new Map(view.overrides);
      for (const id of ids) overrides.set(id, activate);
      const after = defaults({ overrides });
      audit({
        session_id: null,
        kind: 'default',
        subject: ids.join(','),
        ok: true,
        detail: lower(req.action),
      });
      log.info({ action: req.action, ids, defaults: after }, 'default toolsets changed');
      return {
        default_toolsets: after,
        unchanged: ids.filter((id) => before.includes(id) === after.includes(id)),
      };
    },

    async listed(sessionId = DEFAULT_SESSION): Promise<void> {
      // Not one that was down when last tried: a listing must not wait for it on every request.
      const waiting = active(await store.load(sessionId)).filter((id) => unlisted(id));
      if (waiting.length === 0) return;
      await catalog.prepare(waiting).catch((err: Error) => {
        log.warn({ session: sessionId, toolsets: waiting, err: err.message }, 'active toolset not ready');
      });
    },

    async tools(sessionId = DEFAULT_SESSION): Promise<GatewayTool[]> {
      return toolsOf(await store.load(sessionId));
    },

    toolsetTools(toolsetId: string): GatewayTool[] | undefined {
      return catalog.toolset(toolsetId)?.tools.flatMap((name) => {
        const tool = catalog.tools.get(name);
        return tool ? [{ ...tool.definition, toolset: toolsetId }] : [];
      });
    },

    async callTool(
      sessionId: string,
      name: string,
      args: Record<string, unknown>,
      call: CallIdentity = {},
    ): Promise<ToolResult> {
      const auditCall = (ok: boolean, detail?: string) =>
        audit({ session_id: sessionId, kind: 'call', subject: name, ok, detail });
      const refuse = (code: RefusalCode, message: string, details?: Record<string, unknown>) => {
        auditCall(false, message);
        trace.getActiveSpan()?.setAttribute('toolshift.refusal', code);
        return new Refusal(code, message, details);
      };
      const [, view] = await Promise.all([catalog.refreshFor(name), store.load(sessionId)]);
      const tool = catalog.tools.get(name);
      const on = active(view);
      const withheld = catalog.withheld(name);
      if (withheld) throw refuse('withheld', withheld);
      if (!tool) {
        const names = toolNames(on);
        const listed = names.length > 0 ? names.join(', ') : 'none (activate a toolset first)';
        throw refuse('unknown_tool', `Unknown tool ${name}. Tools active in this session: ${listed}`);
      }
      if (view.disabled.has(tool.toolset)) {
        throw refuse(
          'disabled',
          `Tool ${name} belongs to toolset ${tool.toolset}, which the operator has disabled`,
        );
      }
      if (!on.includes(tool.toolset)) {
        throw refuse(
          'inactive',
          `Tool ${name} belongs to toolset ${tool.toolset}, which is not active in this session; activate ${tool.toolset} first`,
        );
      }
      if (!tool.validate(args)) {
        const problems = describeValidationErrors(tool.validate.errors);
        const expected = describeParameters(tool.definition.parameters);
        throw refuse(
          'invalid_arguments',
          `Invalid arguments for ${name}: ${problems}. Expected: ${expected}`,
        );
      }
      const identity = { ...call, session_id: sessionId, tool: name };
      const check = () =>
        deps.ceiling.checkCall(
          sessionId,
          { name, toolset: tool.toolset, annotations: tool.definition.annotations },
          args,
        );
      // The backend hears the key too (the tool-server keeps its own record, an upstream gets it in _meta).
      const key = call.idempotency_key;
      return keyedCall(
        deps.callKeys,
        identity,
        refuse,
        check,
        () => callBackend(tool, { name, args, sessionId, key }, auditCall, refuse),
        (err) => log.error({ err, key }, 'the outcome of a keyed call could not be recorded'),
      );
    },
  };
  /**
   * The store's filter for a search: a toolset stands for its own changes (a subject naming it, alone or in a
   * list) and the calls of its tools; a tool for its calls; the outcome for `ok`.
   */
  function auditFilter(search: AuditSearchQuery & { cursor?: string; limit: number }): AuditFilter {
    const { toolset, tool, outcome, ...rest } = search;
    let subjects: string[] | undefined;
    if (toolset) subjects = [toolset, ...(catalog.toolset(toolset)?.tools ?? [])];
    if (tool) subjects = subjects && !subjects.includes(tool) ? [] : [tool];
    return { ...rest, subjects, ok: outcome === undefined ? undefined : outcome === 'ok' };
  }
  const oneAtATime = serialiser();
  const ops = { catalog, store, audit, log, ceiling: deps.ceiling, listToolsets: api.listToolsets, validIds };
  return {
    ...api,
    ...fixedViews(ops),
    ...operatorActions(ops),
    /** The upstream server behind an MCP-backed toolset, if it is one. */
    upstream: (toolsetId: string) => catalog.upstream(toolsetId),
    /** Deletes a session that ended (a legacy MCP session closed) with its active toolsets and its limits' counters. */
    async endSession(sessionId: string): Promise<void> {
      deps.ceiling.forgetSession(sessionId);
      await store.dropSessions([sessionId]);
    },
    /** Upstream MCP servers and their state, for /health. */
    upstreams: () => catalog.upstreams(),
    /** A worker took `taskId` over under `fence`: calls under a lower one are refused from now. */
    announceFence: async (taskId: string, fence: number): Promise<number> =>
      deps.callKeys ? deps.callKeys.announce(taskId, fence, Date.now()) : fence,
    /** The operator's ceiling: policy, approvals, limits (ceiling.ts). */
    ceiling: deps.ceiling,
    /** Audit rows, newest first, a page at a time. */
    listAudit: (search: AuditSearchQuery & { cursor?: string; limit: number }) =>
      store.listAudit(auditFilter(search)),
    /** Every audit row the search matches, newest first, a page at a time (for an export). */
    async *exportAudit(search: AuditSearchQuery): AsyncGenerator<AuditRow[]> {
      const filter = auditFilter({ ...search, limit: AUDIT_PAGE_MAX });
      for (;;) {
        const page = await store.listAudit(filter);
        if (page.audit.length > 0) yield page.audit;
        if (!page.next_cursor) return;
        filter.cursor = page.next_cursor;
      }
    },
    /** Calls `listener` with the ids of toolsets whose tools changed (upstream list_changed, approvals, reloads). */
    onCatalogChange: (listener: (ids: string[]) => void) => catalog.onChange(listener),
    /**
     * The manage_toolsets meta-tool with a model's raw arguments, for the agent's loop and the MCP face. A
     * session's changes run one at a time: two parallel ACTIVATE calls each judged against the same "before"
     * once both passed TOOL_TOKEN_BUDGET together (3,767 tokens against 3,500).
     */
    manageToolsets: (sessionId: string, args: Record<string, unknown>) =>
      oneAtATime(sessionId, () =>
        manageToolsets(
          {
            ...api,
            audit,
            toolTokens: {
              of: definitionTokens,
              prepare: (sid, ids) =>
                prepare(
                  sid,
                  ids.filter((id) => catalog.toolset(id)),
                ),
              base: counter.tool(manageToolsetsDefinition),
              budget: deps.toolTokenBudget,
              tokenizer: counter.name,
            },
          },
          sessionId,
          args,
        ),
      ),
  };
}

function lower(action: ChangeToolsetsRequest['action']) {
  return action.toLowerCase() as 'activate' | 'deactivate' | 'enable' | 'disable';
}
