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

export function toolNames(c: GatewayCore, toolsetIds: readonly string[]): string[] {
  return toolsetIds.flatMap((id) => c.catalog.toolset(id)?.tools ?? []);
}

/** A toolset's tool definitions as offered (undefined: no such toolset). */
export function toolsetTools(c: GatewayCore, toolsetId: string): GatewayTool[] | undefined {
  return c.catalog.toolset(toolsetId)?.tools.flatMap((name) => {
    const tool = c.catalog.tools.get(name);
    return tool ? [{ ...tool.definition, toolset: toolsetId }] : [];
  });
}

/** Tokens of the toolsets' tool definitions known so far (an upstream toolset not yet listed counts 0). */
export const definitionTokens = (c: GatewayCore, ids: readonly string[]) =>
  c.counter.tools(
    ids.flatMap((id) =>
      (c.catalog.toolset(id)?.tools ?? []).flatMap((name) => {
        const tool = c.catalog.tools.get(name);
        return tool ? [tool.definition] : [];
      }),
    ),
  );

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
