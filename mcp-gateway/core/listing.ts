import type { ListToolsetsResponse } from '../contract.ts';
import type { SessionView } from '../store/interface.ts';
import type { GatewayCore } from './parts.ts';
import { active, defaults, definitionTokens } from './session-toolsets.ts';

/** The catalog as listed for a session: each toolset's state in it; ranked by `query` when one is given. */
export function listing(
  c: GatewayCore,
  sessionId: string,
  view: SessionView,
  query?: string,
): ListToolsetsResponse {
  const { catalog } = c;
  const on = new Set(active(c, view));
  const starting = new Set(defaults(c, view));
  const info = (t: (typeof catalog.toolsets)[number], matched?: string[], certain?: boolean) => ({
    id: t.id,
    description: t.description,
    tools: t.tools,
    enabled: !view.disabled.has(t.id),
    active: on.has(t.id),
    default: starting.has(t.id),
    ...catalog.status(t.id),
    ...(t.tools.length > 0 ? { definition_tokens: definitionTokens(c, [t.id]) } : {}),
    ...(matched ? { matched_tools: matched } : {}),
    ...(on.has(t.id) && view.only.has(t.id) ? { active_tools: [...(view.only.get(t.id) ?? [])] } : {}),
    ...(certain ? { certain } : {}),
  });
  // With a query: ranked by the search index (search.ts), best first, each with the tools that matched.
  const toolsets = query?.trim()
    ? catalog.search(query).flatMap((hit) => {
        const t = catalog.toolset(hit.id);
        // Certain means an agent may activate it unasked: not when the operator's policy asks or denies.
        const certain = hit.certain && c.ceiling.activationFree(hit.id);
        return t ? [info(t, hit.matched_tools, certain)] : [];
      })
    : catalog.toolsets.map((t) => info(t));
  return { session_id: sessionId, toolsets, auto_activate: c.activate !== undefined };
}
