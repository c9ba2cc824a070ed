import { ConsentNeeded, UpstreamError } from '../backends/mcp-connection.ts';
import { CatalogError } from '../catalog/catalog.ts';
import type { GatewayTool } from '../contract.ts';
import { Refusal } from '../refusals.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { SessionView } from '../store/interface.ts';
import { consentDetails } from './keyed-calls.ts';
import type { GatewayCore } from './parts.ts';

// What every rule asks of a session's toolsets: which are active, what their tools are and cost, whether ids
// are known, and starting the upstream servers of toolsets about to be used.

/** What a new session starts with: the files' `default` toolsets as the user changed them (changeDefaults). */
export const defaults = (c: GatewayCore, view: Pick<SessionView, 'overrides'>) =>
  c.catalog.toolsets.filter((t) => view.overrides.get(t.id) ?? t.default).map((t) => t.id);

/**
 * The session's active toolsets that still exist and are enabled, in activation order. A session that was
 * never changed is not stored: reading one does not create it, it simply has the default toolsets.
 */
export function active(c: GatewayCore, view: SessionView): string[] {
  const ids = view.toolsets ?? defaults(c, view);
  return ids.filter((id) => c.catalog.toolset(id) && !view.disabled.has(id));
}

/** Toolsets active with only some of their tools, and those tools (SessionView.only). */
export type Only = ReadonlyMap<string, readonly string[]> | undefined;

/** The names of a toolset's tools active in a session: all of them, or those `only` names for it. */
function activeNames(c: GatewayCore, toolsetId: string, only?: Only): string[] {
  const all = c.catalog.toolset(toolsetId)?.tools ?? [];
  const some = only?.get(toolsetId);
  return some ? all.filter((name) => some.includes(name)) : all;
}

export function toolNames(c: GatewayCore, toolsetIds: readonly string[], only?: Only): string[] {
  return toolsetIds.flatMap((id) => activeNames(c, id, only));
}

/** A toolset's tool definitions as offered (undefined: no such toolset); with `only`, those active. */
export function toolsetTools(c: GatewayCore, toolsetId: string, only?: Only): GatewayTool[] | undefined {
  if (!c.catalog.toolset(toolsetId)) return undefined;
  return activeNames(c, toolsetId, only).flatMap((name) => {
    const tool = c.catalog.tools.get(name);
    return tool ? [{ ...tool.definition, toolset: toolsetId }] : [];
  });
}

/** Tokens of tool definitions by name (a tool not listed yet counts 0). */
export const namedTokens = (c: GatewayCore, names: readonly string[]) =>
  c.counter.tools(
    names.flatMap((name) => {
      const tool = c.catalog.tools.get(name);
      return tool ? [tool.definition] : [];
    }),
  );

/** Tokens of the toolsets' tool definitions known so far (an upstream toolset not yet listed counts 0). */
export const definitionTokens = (c: GatewayCore, ids: readonly string[], only?: Only) =>
  namedTokens(c, toolNames(c, ids, only));

export const validIds = (c: GatewayCore) => c.catalog.toolsets.map((t) => t.id).join(', ');

export function requireKnown(
  c: GatewayCore,
  sessionId: string | null,
  kind: AuditEntry['kind'],
  ids: readonly string[],
) {
  const unknown = ids.filter((id) => !c.catalog.toolset(id));
  if (unknown.length > 0) {
    c.audit({
      session_id: sessionId,
      kind,
      subject: ids.join(','),
      ok: false,
      detail: `unknown: ${unknown.join(',')}`,
    });
    throw new Refusal(
      'unknown_toolset',
      `Unknown toolset id(s): ${unknown.join(', ')}. Valid ids: ${validIds(c)}`,
      {
        valid_ids: c.catalog.toolsets.map((t) => t.id),
      },
    );
  }
}

/**
 * An upstream toolset whose server has not listed its tools yet (they are unknown, not none): not started
 * (`idle`), or, with `orDown`, one that could not be reached when last tried.
 */
export const unlisted = (c: GatewayCore, id: string, orDown = false) => {
  const health = c.catalog.status(id)?.health;
  return (
    (c.catalog.toolset(id)?.tools.length ?? 0) === 0 && (health === 'idle' || (orDown && health === 'down'))
  );
};

/** Connects the upstream servers of toolsets about to be activated; a server that cannot serve refuses the activation. */
export async function prepare(c: GatewayCore, sessionId: string | null, ids: readonly string[]) {
  try {
    await c.catalog.prepare(ids);
  } catch (err) {
    if (!(err instanceof UpstreamError || err instanceof CatalogError)) throw err;
    const message = `Cannot activate ${ids.join(', ')}: ${err.message}`;
    c.audit({
      session_id: sessionId,
      kind: 'activate',
      subject: ids.join(','),
      ok: false,
      detail: message,
    });
    if (err instanceof ConsentNeeded) throw new Refusal('consent_required', message, consentDetails(err));
    throw new Refusal(err instanceof UpstreamError ? 'upstream_failed' : 'unavailable', message);
  }
}
