import type { Tool } from '@modelcontextprotocol/client';
import type { McpConnection } from './backends/mcp-connection.ts';
import { resolveCollisions, type ToolsetRuntime } from './catalog-build.ts';
import { CatalogError, type McpBackendSpec, type ToolsetSpec } from './toolset-files.ts';

// Reload without restart: re-read TOOLSETS_DIR, connect servers that are new, and swap the catalog in one
// step, or refuse with the same file-and-line errors as at start and leave the running catalog as it was.

/** The answer of a reload: ids by what happened to them, and problems that did not stop it. */
export interface ReloadResult {
  added: string[];
  removed: string[];
  changed: string[];
  unchanged: string[];
  /** Servers that could not be reached (their toolsets are loaded and show health "down"). */
  warnings: string[];
}

/** Everything in a spec that matters for what it offers (the server key, not its display form). */
function signature(spec: ToolsetSpec): string {
  const backend = typeof spec.backend === 'string' ? spec.backend : spec.backend.key;
  const { id, description, include, prefix, pin, timeoutMs, file } = spec;
  return JSON.stringify({
    id,
    description,
    default: spec.default,
    backend,
    include,
    prefix,
    pin,
    timeoutMs,
    file,
  });
}

/** Compares the running toolsets with the files just read. */
export function diffSpecs(
  current: readonly ToolsetSpec[],
  next: readonly ToolsetSpec[],
): Omit<ReloadResult, 'warnings'> {
  const before = new Map(current.map((s) => [s.id, signature(s)]));
  const after = new Map(next.map((s) => [s.id, signature(s)]));
  return {
    added: next.filter((s) => !before.has(s.id)).map((s) => s.id),
    removed: current.filter((s) => !after.has(s.id)).map((s) => s.id),
    changed: next.filter((s) => before.has(s.id) && before.get(s.id) !== after.get(s.id)).map((s) => s.id),
    unchanged: next.filter((s) => before.get(s.id) === after.get(s.id)).map((s) => s.id),
  };
}

type McpSpec = ToolsetSpec & { backend: McpBackendSpec };
const isMcp = (spec: ToolsetSpec): spec is McpSpec => typeof spec.backend !== 'string';

/** What a reload needs of the running catalog (catalog.ts passes its internals). */
export interface ReloadContext {
  current: readonly ToolsetSpec[];
  /** Reads and checks the toolset files (throws CatalogError with file and line). */
  load(): ToolsetSpec[];
  connections: Map<string, McpConnection>;
  applied: WeakMap<McpConnection, Tool[]>;
  nativeRuntimes(next: ToolsetSpec[]): Promise<Map<string, ToolsetRuntime>>;
  connectionFor(spec: McpBackendSpec, pool?: Map<string, McpConnection>): McpConnection;
  mcpRuntime(
    spec: McpSpec,
    listing: Tool[] | null,
    persist: boolean,
    pool?: Map<string, McpConnection>,
  ): ToolsetRuntime;
  dropToolset(id: string): void;
  install(next: ToolsetSpec[], runtimes: Map<string, ToolsetRuntime>, changed: string[]): void;
  /** Ids of the running toolsets that offer tools: they keep their names against new files. */
  offering(): Set<string>;
}

/** Builds the next catalog beside the running one and swaps it in only when it is valid. */
export async function reloadCatalog(ctx: ReloadContext): Promise<ReloadResult> {
  const fresh = new Map<string, McpConnection>();
  try {
    const next = ctx.load();
    const plan = diffSpecs(ctx.current, next);
    const runtimes = await ctx.nativeRuntimes(next);
    const warnings: string[] = [];
    const keys = new Set(next.filter(isMcp).map((s) => s.backend.key));
    const pool = new Map([...ctx.connections].filter(([key]) => keys.has(key)));
    for (const spec of next.filter(isMcp)) {
      const existing = pool.get(spec.backend.key);
      let listing: Tool[] | null = existing ? (ctx.applied.get(existing) ?? null) : null;
      if (!existing) {
        const conn = ctx.connectionFor(spec.backend, fresh);
        pool.set(spec.backend.key, conn);
        listing = await conn.listTools().catch((err: Error) => {
          warnings.push(`${spec.file}: ${err.message}`);
          return null;
        });
      }
      runtimes.set(spec.id, ctx.mcpRuntime(spec, listing, false, pool));
    }
    const problems = resolveCollisions(
      next.map((s) => runtimes.get(s.id) as ToolsetRuntime),
      ctx.offering(),
    ).flatMap((rt) => (rt.error ? [rt.error] : []));
    if (problems.length > 0) throw new CatalogError(problems.join('\n'));
    // Valid: commit. New connections join, gone ones stop, removed toolsets leave every session.
    for (const [key, conn] of fresh) {
      ctx.connections.set(key, conn);
      if (conn.status().state === 'up') ctx.applied.set(conn, conn.knownTools());
    }
    fresh.clear();
    for (const [key, conn] of ctx.connections) {
      if (pool.has(key)) continue;
      ctx.connections.delete(key);
      await conn.close();
    }
    for (const id of plan.removed) ctx.dropToolset(id);
    const committed = new Map<string, ToolsetRuntime>();
    for (const spec of next) {
      if (!isMcp(spec)) committed.set(spec.id, runtimes.get(spec.id) as ToolsetRuntime);
      else {
        const conn = ctx.connectionFor(spec.backend);
        committed.set(
          spec.id,
          ctx.mcpRuntime(spec, conn.status().state === 'up' ? conn.knownTools() : null, true),
        );
      }
    }
    ctx.install(next, committed, [...plan.added, ...plan.changed, ...plan.removed]);
    return { ...plan, warnings };
  } finally {
    for (const conn of fresh.values()) await conn.close();
  }
}
