import type { Tool } from '@modelcontextprotocol/client';
import type { McpConnection } from '../backends/mcp-connection.ts';
import type { ToolsetRuntime } from './build.ts';
import type { LoadedToolsets, McpBackendSpec, ToolsetSpec } from './toolset-files.ts';

// Reload without restart: re-read the shipped and the user's toolset files and swap the catalog in one step,
// or refuse (a shipped file that does not load, a native tool not served) with the same file-and-line errors
// as at start and leave the running catalog as it was. Like the start, it starts no server: a new upstream
// server starts on first use (or now, if its toolset is `default`, as at start), and one already running
// whose file still names it keeps running. A toolset whose names collide with another's, or a user file that
// does not load, is skipped with a warning; the others load.

/** The answer of a reload: ids by what happened to them, and problems that did not stop it. */
export interface ReloadResult {
  added: string[];
  removed: string[];
  changed: string[];
  unchanged: string[];
  /** What did not stop the reload: skipped files and toolsets (collisions), default servers that did not start. */
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
  /** Reads and checks the toolset files (throws CatalogError with file and line for a shipped file). */
  load(): LoadedToolsets;
  connections: Map<string, McpConnection>;
  applied: WeakMap<McpConnection, Tool[]>;
  nativeRuntimes(next: ToolsetSpec[]): Promise<Map<string, ToolsetRuntime>>;
  connectionFor(spec: McpBackendSpec): McpConnection;
  mcpRuntime(spec: McpSpec, listing: Tool[] | null, persist: boolean): Promise<ToolsetRuntime>;
  dropToolset(id: string): Promise<void>;
  /** Swaps in the next catalog; returns its runtimes after collisions are resolved. */
  install(next: ToolsetSpec[], runtimes: Map<string, ToolsetRuntime>, changed: string[]): ToolsetRuntime[];
}

/** Builds the next catalog from the files and swaps it in, unless a shipped file or native toolset is invalid. */
export async function reloadCatalog(ctx: ReloadContext): Promise<ReloadResult> {
  // Everything that can refuse the reload comes first, before anything changes.
  const loaded = ctx.load();
  const next = loaded.specs;
  const plan = diffSpecs(ctx.current, next);
  const runtimes = await ctx.nativeRuntimes(next);
  const warnings = [...loaded.warnings];
  // Servers no file names any more stop; the others keep running. Nothing is started here.
  const keys = new Set(next.filter(isMcp).map((s) => s.backend.key));
  for (const [key, conn] of ctx.connections) {
    if (keys.has(key)) continue;
    ctx.connections.delete(key);
    await conn.close();
  }
  for (const id of plan.removed) await ctx.dropToolset(id);
  for (const spec of next.filter(isMcp)) {
    // A running server's listing is current; otherwise the one stored from an earlier run (if any) stands
    // until first use, as at start.
    const conn = ctx.connections.get(spec.backend.key);
    const listing = conn ? (ctx.applied.get(conn) ?? null) : null;
    runtimes.set(spec.id, await ctx.mcpRuntime(spec, listing, true));
  }
  const installed = ctx.install(next, runtimes, [...plan.added, ...plan.changed, ...plan.removed]);
  for (const rt of installed) {
    if (rt.error) warnings.push(`toolset ${rt.spec.id} is skipped (it offers no tools): ${rt.error}`);
  }
  return { ...plan, warnings };
}
