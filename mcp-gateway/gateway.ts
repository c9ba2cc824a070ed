import { HttpError } from '../lib/http.ts';
import { ServiceError } from '../lib/http-client.ts';
import type { Logger } from '../lib/log.ts';
import type { Catalog } from './catalog.ts';
import type {
  ChangeToolsetsRequest,
  ChangeToolsetsResponse,
  GatewayTool,
  ListToolsetsResponse,
  ToolResult,
} from './contract.ts';
import { DEFAULT_SESSION } from './contract.ts';
import { describeParameters, describeValidationErrors } from './describe-schema.ts';
import { manageToolsets } from './manage-toolsets.ts';
import type { GatewayStore } from './store.ts';

/** The gateway's rules in one place, shared by the REST routes and (later) the MCP face. */
export type Gateway = ReturnType<typeof createGateway>;

/** Session state, the operator ceiling, and enforcement of "only active tools may be called". */
export function createGateway(deps: { catalog: Catalog; store: GatewayStore; log: Logger }) {
  const { catalog, store, log } = deps;
  const validIds = () => catalog.toolsets.map((t) => t.id).join(', ');

  const defaults = () => catalog.toolsets.filter((t) => t.default).map((t) => t.id);

  /**
   * The session's active toolsets that still exist and are enabled, in activation order. A session that was
   * never changed is not stored: reading one does not create it, it simply has the default toolsets.
   */
  function active(sessionId: string): string[] {
    const disabled = store.disabledToolsets();
    const ids = store.activeToolsets(sessionId) ?? defaults();
    return ids.filter((id) => catalog.toolset(id) && !disabled.has(id));
  }

  function toolNames(toolsetIds: readonly string[]): string[] {
    return toolsetIds.flatMap((id) => catalog.toolset(id)?.tools ?? []);
  }

  function requireKnown(sessionId: string, action: ChangeToolsetsRequest['action'], ids: readonly string[]) {
    const unknown = ids.filter((id) => !catalog.toolset(id));
    if (unknown.length > 0) {
      store.audit({
        session_id: sessionId,
        kind: lower(action),
        subject: ids.join(','),
        ok: false,
        detail: `unknown: ${unknown.join(',')}`,
      });
      throw new HttpError(400, `Unknown toolset id(s): ${unknown.join(', ')}. Valid ids: ${validIds()}`, {
        valid_ids: catalog.toolsets.map((t) => t.id),
      });
    }
  }

  function matches(id: string, words: string[]): number {
    const ts = catalog.toolset(id);
    if (!ts) return 0;
    const hay = [
      ts.id,
      ts.description,
      ...ts.tools.flatMap((name) => [name, catalog.tools.get(name)?.definition.description ?? '']),
    ]
      .join(' ')
      .toLowerCase();
    return words.filter((w) => hay.includes(w)).length;
  }

  const api = {
    listToolsets(sessionId = DEFAULT_SESSION, query?: string): ListToolsetsResponse {
      const on = new Set(active(sessionId));
      const disabled = store.disabledToolsets();
      let toolsets = catalog.toolsets.map((t) => ({
        id: t.id,
        description: t.description,
        tools: t.tools,
        enabled: !disabled.has(t.id),
        active: on.has(t.id),
        default: t.default,
      }));
      const words = (query ?? '').toLowerCase().match(/[a-z0-9]{2,}/g) ?? [];
      if (words.length > 0) {
        const score = new Map(toolsets.map((t) => [t.id, matches(t.id, words)]));
        toolsets = toolsets
          .filter((t) => (score.get(t.id) ?? 0) > 0)
          .sort((a, b) => (score.get(b.id) ?? 0) - (score.get(a.id) ?? 0));
      }
      return { session_id: sessionId, toolsets };
    },

    changeToolsets(req: ChangeToolsetsRequest): ChangeToolsetsResponse {
      const sessionId = req.session_id ?? DEFAULT_SESSION;
      const ids = [...new Set(req.toolset_ids)];
      requireKnown(sessionId, req.action, ids);
      const before = active(sessionId);
      if (req.action === 'ACTIVATE' || req.action === 'DEACTIVATE') store.ensureSession(sessionId, before);
      let changed: string[];
      if (req.action === 'ACTIVATE') {
        const disabled = ids.filter((id) => store.disabledToolsets().has(id));
        if (disabled.length > 0) {
          store.audit({
            session_id: sessionId,
            kind: 'activate',
            subject: ids.join(','),
            ok: false,
            detail: 'disabled',
          });
          throw new HttpError(
            403,
            `Toolset(s) disabled by the operator: ${disabled.join(', ')}; they cannot be activated`,
          );
        }
        changed = store.activate(sessionId, ids);
      } else if (req.action === 'DEACTIVATE') {
        changed = store.deactivate(sessionId, ids);
      } else {
        const enable = req.action === 'ENABLE';
        const disabled = store.disabledToolsets();
        changed = ids.filter((id) => disabled.has(id) === enable);
        for (const id of changed) store.setEnabled(id, enable);
      }
      store.audit({ session_id: sessionId, kind: lower(req.action), subject: ids.join(','), ok: true });
      const after = active(sessionId);
      const beforeTools = toolNames(before);
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

    tools(sessionId = DEFAULT_SESSION): GatewayTool[] {
      return active(sessionId).flatMap((toolsetId) =>
        (catalog.toolset(toolsetId)?.tools ?? []).flatMap((name) => {
          const tool = catalog.tools.get(name);
          return tool ? [{ ...tool.definition, toolset: toolsetId }] : [];
        }),
      );
    },

    async callTool(sessionId: string, name: string, args: Record<string, unknown>): Promise<ToolResult> {
      const audit = (ok: boolean, detail?: string) =>
        store.audit({ session_id: sessionId, kind: 'call', subject: name, ok, detail });
      const refuse = (status: 400 | 403 | 404 | 502, message: string) => {
        audit(false, message);
        return new HttpError(status, message);
      };
      const tool = catalog.tools.get(name);
      const on = active(sessionId);
      if (!tool) {
        const names = toolNames(on);
        const listed = names.length > 0 ? names.join(', ') : 'none (activate a toolset first)';
        throw refuse(404, `Unknown tool ${name}. Tools active in this session: ${listed}`);
      }
      if (store.disabledToolsets().has(tool.toolset)) {
        throw refuse(403, `Tool ${name} belongs to toolset ${tool.toolset}, which the operator has disabled`);
      }
      if (!on.includes(tool.toolset)) {
        throw refuse(
          403,
          `Tool ${name} belongs to toolset ${tool.toolset}, which is not active in this session; activate ${tool.toolset} first`,
        );
      }
      if (!tool.validate(args)) {
        const problems = describeValidationErrors(tool.validate.errors);
        const expected = describeParameters(tool.definition.parameters);
        throw refuse(400, `Invalid arguments for ${name}: ${problems}. Expected: ${expected}`);
      }
      try {
        const result = await tool.backend.callTool(name, args);
        audit(result.success, result.error);
        return result;
      } catch (err) {
        // A backend refusing the arguments is a malformed call, reported the same way as the gateway's own check.
        if (err instanceof ServiceError && err.status === 400) throw refuse(400, err.message);
        throw refuse(502, `Backend ${tool.backend.name} failed for ${name}: ${(err as Error).message}`);
      }
    },
  };
  return {
    ...api,
    /** The manage_toolsets meta-tool with a model's raw arguments, for the agent's loop and the MCP face. */
    manageToolsets: (sessionId: string, args: Record<string, unknown>) =>
      manageToolsets({ ...api, audit: (entry) => store.audit(entry) }, sessionId, args),
  };
}

function lower(action: ChangeToolsetsRequest['action']) {
  return action.toLowerCase() as 'activate' | 'deactivate' | 'enable' | 'disable';
}
