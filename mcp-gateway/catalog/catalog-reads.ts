import type { UpstreamStatus } from '../backends/mcp-connection.ts';
import { type CatalogState, connectionFor, isMcp } from './catalog-state.ts';
import type { ToolsetStatus } from './catalog-types.ts';
import { definitionHash } from './pins.ts';
import { type ToolsetHit, ToolsetIndex } from './search.ts';

// What the catalog reports of its toolsets and servers: for the admin listing, /health, refusals and search.

/** Why a tool is withheld, for the refusal message; undefined when it is not. */
export function withheldReason(st: CatalogState, toolName: string): string | undefined {
  const w = st.withheldByName.get(toolName);
  if (!w) return undefined;
  const why =
    w.status === 'changed'
      ? 'its definition changed since an operator approved it'
      : 'it appeared after the toolset was first seen';
  return `Tool ${toolName} of toolset ${w.toolset} is withheld: ${why} (rug-pull protection). An operator can review it in GET /mcp/admin/toolsets and approve it with POST /mcp/admin/toolsets/${w.toolset}/approve`;
}

export function toolsetStatus(st: CatalogState, id: string): ToolsetStatus | undefined {
  const rt = st.runtimes.get(id);
  if (!rt) return undefined;
  const withheld = rt.withheld.map((w) => ({
    name: w.exposed,
    status: w.status,
    hash: definitionHash(w.definition),
    definition: w.definition as unknown as Record<string, unknown>,
    ...(w.status === 'changed' ? { diff: w.diff } : {}),
  }));
  if (!isMcp(rt.spec)) {
    return {
      backend: rt.spec.backend as string,
      ...(rt.error ? { health: 'error' as const, health_reason: rt.error } : {}),
      withheld,
    };
  }
  const up = connectionFor(st, rt.spec.backend).status();
  const health = rt.error ? 'error' : up.state;
  const reason = rt.error ?? up.reason;
  return {
    backend: { mcp: rt.spec.backend.display },
    health,
    ...(reason ? { health_reason: reason } : {}),
    withheld,
  };
}

/** Every upstream server: its state and the toolsets it serves. */
export function upstreams(st: CatalogState): Record<string, UpstreamStatus & { toolsets: string[] }> {
  const out: Record<string, UpstreamStatus & { toolsets: string[] }> = {};
  const names = new Map<string, string>();
  for (const spec of st.specs) {
    if (!isMcp(spec)) continue;
    // Two servers can share a label (same command, other env): the second is "label (2)".
    let name = names.get(spec.backend.key);
    if (!name) {
      const used = new Set(names.values());
      name = spec.backend.label;
      for (let n = 2; used.has(name); n++) name = `${spec.backend.label} (${n})`;
      names.set(spec.backend.key, name);
    }
    const entry = out[name] ?? { ...connectionFor(st, spec.backend).status(), toolsets: [] };
    entry.toolsets.push(spec.id);
    out[name] = entry;
  }
  return out;
}

/** Ranks toolsets and their tools for a plain-language query. */
export function search(st: CatalogState, query: string, limit?: number): ToolsetHit[] {
  st.index ??= new ToolsetIndex(
    st.toolsets.map((t) => ({
      id: t.id,
      description: t.description,
      keywords: t.keywords,
      learned: st.learned.get(t.id),
      tools:
        t.tools.length > 0 || !isMcp(t)
          ? t.tools.map((name) => {
              const definition = st.tools.get(name)?.definition;
              return { name, description: definition?.description ?? '', parameters: definition?.parameters };
            })
          : (t.include ?? []).map((name) => ({ name, description: '' })),
    })),
  );
  return st.index.search(query, limit);
}
