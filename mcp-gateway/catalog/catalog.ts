import type { Tool } from '@modelcontextprotocol/client';
import { createLogger } from '../../lib/telemetry/log.ts';
import type { Backend } from '../backends/backend.ts';
import { mcpToolsetBackend } from '../backends/mcp-backend.ts';
import { McpConnection, type UpstreamStatus } from '../backends/mcp-connection.ts';
import {
  type CatalogTool,
  mcpRuntime,
  nativeRuntimes,
  resolveCollisions,
  schemaCompiler,
  type ToolsetRuntime,
  type WithheldTool,
} from './build.ts';
import { definitionHash, memoryPinStore, pinnedShape } from './pins.ts';
import { type ReloadResult, reloadCatalog } from './reload.ts';
import { type ToolsetHit, ToolsetIndex } from './search.ts';
import { CatalogError, loadToolsets, type McpBackendSpec, type ToolsetSpec } from './toolset-files.ts';

// The live toolset catalog: toolset files joined with what their backends serve. Native toolsets are
// checked at start; upstream MCP servers connect on first activation (or at start when a toolset is
// `default`), and their listings pass through the pins before any tool is offered. A toolset whose tool
// names another already offers is skipped (it offers nothing and says why); the rest load. Reload swaps the
// whole catalog at once, or not at all, and starts no server the start would not have started.

export type { CatalogTool, GatewayToolDefinition } from './build.ts';
export type { CatalogOptions, Toolset, ToolsetStatus } from './catalog-types.ts';

import type { CatalogOptions, Toolset, ToolsetStatus } from './catalog-types.ts';

export { CatalogError, loadToolsetFiles, loadToolsets, type ToolsetSpec } from './toolset-files.ts';

import type { Catalog } from './interface.ts';

export type { Catalog };

const isMcp = (spec: ToolsetSpec): spec is ToolsetSpec & { backend: McpBackendSpec } =>
  typeof spec.backend !== 'string';

/** Joins toolset files with the backends' tool lists; refuses a native tool or backend that does not exist. */
export async function buildCatalog(
  initial: ToolsetSpec[],
  backends: Record<string, Backend>,
  opts: CatalogOptions = {},
): Promise<Catalog> {
  const log = opts.log ?? createLogger('mcp-gateway', 'silent');
  const store = opts.store ?? memoryPinStore();
  const compile = schemaCompiler((message) => log.warn({ message }, 'a tool schema does not compile'));
  const connections = new Map<string, McpConnection>();
  const applied = new WeakMap<McpConnection, Tool[]>();
  const listeners = new Set<(ids: string[]) => void>();
  let specs: ToolsetSpec[] = [];
  let runtimes = new Map<string, ToolsetRuntime>();
  let toolsets: Toolset[] = [];
  let byId = new Map<string, Toolset>();
  let tools = new Map<string, CatalogTool>();
  let withheldByName = new Map<string, WithheldTool & { toolset: string }>();
  let index: ToolsetIndex | undefined;
  let reloading = false;
  /**
   * Changes of the catalog that read or write the store (a listing applied, pins approved or re-read, a
   * reload) run one after the other, each installing over what the one before installed.
   */
  let tail: Promise<void> = Promise.resolve();
  const inTurn = <T>(work: () => Promise<T>): Promise<T> => {
    const run = tail.then(work);
    tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  };

  function connectionFor(spec: McpBackendSpec, pool = connections): McpConnection {
    let conn = pool.get(spec.key);
    if (!conn) {
      conn = new McpConnection(spec.label, spec.server, { log, redactor: spec.redactor, ...opts.connection });
      const c = conn;
      conn.onToolsChanged((listing) => {
        if (connections.get(spec.key) !== c) return;
        applyListing(spec.key, c, listing).then(
          () => log.info({ upstream: spec.label }, 'upstream tools changed'),
          (err: Error) => log.warn({ upstream: spec.label, err: err.message }, 'upstream tools not applied'),
        );
      });
      pool.set(spec.key, conn);
    }
    return conn;
  }

  /**
   * An MCP toolset's runtime from a listing (null: the one stored, if any), writing first-sight pins and the
   * listing if `persist`: one read of what the store holds of it, then its pins and listing written.
   */
  async function mcpToolsetRuntime(
    spec: ToolsetSpec & { backend: McpBackendSpec },
    listing: Tool[] | null,
    persist: boolean,
    pool = connections,
  ) {
    const conn = connectionFor(spec.backend, pool);
    const [stored, pinned] = await Promise.all([
      listing === null ? store.lastListing(spec.id) : null,
      spec.pin ? store.pins(spec.id) : null,
    ]);
    const definitions = listing?.map((t) => spec.backend.redactor.deep(pinnedShape(t))) ?? stored ?? [];
    const known = listing !== null || definitions.length > 0;
    let pins = pinned;
    if (persist && listing !== null) {
      if (spec.pin && pins === null) {
        await store.pin(
          spec.id,
          definitions.map((definition) => ({ hash: definitionHash(definition), definition })),
        );
        pins = null;
      }
      await store.saveListing(spec.id, definitions);
    }
    return mcpRuntime(
      spec,
      known ? definitions : null,
      pins,
      (names) =>
        mcpToolsetBackend({
          connection: conn,
          redactor: spec.backend.redactor,
          timeoutMs: spec.timeoutMs,
          maxResultBytes: opts.connection?.maxResultBytes,
          upstreamName: (exposed) => names.get(exposed),
        }),
      compile,
    );
  }

  function install(nextSpecs: ToolsetSpec[], nextRuntimes: Map<string, ToolsetRuntime>, changed: string[]) {
    const offering = new Set(
      [...runtimes.values()].filter((rt) => rt.offered.length > 0).map((rt) => rt.spec.id),
    );
    const resolved = resolveCollisions(
      nextSpecs.map((s) => nextRuntimes.get(s.id) as ToolsetRuntime),
      offering,
    );
    specs = nextSpecs;
    runtimes = new Map(resolved.map((rt) => [rt.spec.id, rt]));
    toolsets = resolved.map((rt) => ({ ...rt.spec, tools: rt.offered.map((t) => t.definition.name) }));
    byId = new Map(toolsets.map((t) => [t.id, t]));
    tools = new Map(resolved.flatMap((rt) => rt.offered.map((t) => [t.definition.name, t] as const)));
    withheldByName = new Map(
      resolved.flatMap((rt) => rt.withheld.map((w) => [w.exposed, { ...w, toolset: rt.spec.id }] as const)),
    );
    index = undefined;
    if (changed.length > 0) for (const listener of listeners) listener(changed);
    return resolved;
  }

  /** Applies a server's listing to its toolsets (their pins judged, the listing stored); in turn with the others. */
  function applyListing(key: string, conn: McpConnection, listing: Tool[]): Promise<void> {
    applied.set(conn, listing);
    return inTurn(async () => {
      // A newer listing of the same server came meanwhile: it is applied instead.
      if (applied.get(conn) !== listing) return;
      const mine = specs.filter((spec) => isMcp(spec) && spec.backend.key === key) as (ToolsetSpec & {
        backend: McpBackendSpec;
      })[];
      const built = await Promise.all(mine.map((spec) => mcpToolsetRuntime(spec, listing, true)));
      const next = new Map(runtimes);
      const changed: string[] = [];
      mine.forEach((spec, i) => {
        // A reload meanwhile that dropped or replaced the toolset has the last word.
        if (!specs.includes(spec)) return;
        next.set(spec.id, built[i]);
        changed.push(spec.id);
      });
      install(specs, next, changed);
    });
  }

  async function prepare(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      const spec = specs.find((s) => s.id === id);
      if (!spec || !isMcp(spec)) continue;
      const conn = connectionFor(spec.backend);
      const listing = await conn.listTools();
      // Applied (or being applied, by another request that got the same listing) before its tools are read.
      if (applied.get(conn) !== listing) await applyListing(spec.backend.key, conn, listing);
      else await tail;
      const error = runtimes.get(id)?.error;
      if (error) throw new CatalogError(error);
    }
  }

  /** Reads an MCP toolset's pins again and installs what they release (in turn with the catalog's other changes). */
  function repin(id: string): Promise<void> {
    return inTurn(async () => {
      const rt = runtimes.get(id);
      if (!rt || !isMcp(rt.spec)) return;
      const built = await mcpToolsetRuntime(rt.spec, null, false);
      if (runtimes.get(id)?.spec !== rt.spec) return;
      const next = new Map(runtimes);
      next.set(id, built);
      install(specs, next, [id]);
    });
  }

  // Start: native toolsets checked against their backends; MCP toolsets from their stored listings.
  const startRuntimes = await nativeRuntimes(initial, backends, opts.waitMs ?? 0, compile);
  for (const spec of initial)
    if (isMcp(spec)) startRuntimes.set(spec.id, await mcpToolsetRuntime(spec, null, false));
  for (const rt of install(initial, startRuntimes, [])) {
    if (rt.error) log.warn({ toolset: rt.spec.id, reason: rt.error }, 'toolset skipped: it offers no tools');
  }
  for (const spec of initial.filter((s) => s.default && isMcp(s))) {
    await prepare([spec.id]).catch((err) =>
      log.warn({ toolset: spec.id, err: err.message }, 'default toolset not ready'),
    );
  }

  return {
    get toolsets(): Toolset[] {
      return toolsets;
    },
    toolset: (id: string): Toolset | undefined => byId.get(id),
    get tools(): Map<string, CatalogTool> {
      return tools;
    },
    /** Connects the upstreams of these toolsets and refreshes their tools; throws when one cannot offer any. */
    prepare,
    /** The upstream connection of an MCP-backed toolset (for a fixed view's prompts and resources). */
    upstream(id: string): McpConnection | undefined {
      const spec = specs.find((s) => s.id === id);
      return spec && isMcp(spec) ? connectionFor(spec.backend) : undefined;
    },
    /** Before a call: reconnects the tool's upstream if it is not up, so pins are current. Never throws. */
    async refreshFor(toolName: string): Promise<void> {
      const owner = tools.get(toolName)?.toolset ?? withheldByName.get(toolName)?.toolset;
      const spec = owner ? specs.find((s) => s.id === owner) : undefined;
      if (!spec || !isMcp(spec) || connectionFor(spec.backend).status().state === 'up') return;
      await prepare([spec.id]).catch(() => {});
    },
    /** Why a tool is withheld, for the refusal message; undefined when it is not. */
    withheld(toolName: string): string | undefined {
      const w = withheldByName.get(toolName);
      if (!w) return undefined;
      const why =
        w.status === 'changed'
          ? 'its definition changed since an operator approved it'
          : 'it appeared after the toolset was first seen';
      return `Tool ${toolName} of toolset ${w.toolset} is withheld: ${why} (rug-pull protection). An operator can review it in GET /mcp/admin/toolsets and approve it with POST /mcp/admin/toolsets/${w.toolset}/approve`;
    },
    status(id: string): ToolsetStatus | undefined {
      const rt = runtimes.get(id);
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
      const up = connectionFor(rt.spec.backend).status();
      const health = rt.error ? 'error' : up.state;
      const reason = rt.error ?? up.reason;
      return {
        backend: { mcp: rt.spec.backend.display },
        health,
        ...(reason ? { health_reason: reason } : {}),
        withheld,
      };
    },
    /** Every upstream server: its state and the toolsets it serves. */
    upstreams(): Record<string, UpstreamStatus & { toolsets: string[] }> {
      const out: Record<string, UpstreamStatus & { toolsets: string[] }> = {};
      const names = new Map<string, string>();
      for (const spec of specs) {
        if (!isMcp(spec)) continue;
        // Two servers can share a label (same command, other env): the second is "label (2)".
        let name = names.get(spec.backend.key);
        if (!name) {
          const used = new Set(names.values());
          name = spec.backend.label;
          for (let n = 2; used.has(name); n++) name = `${spec.backend.label} (${n})`;
          names.set(spec.backend.key, name);
        }
        const entry = out[name] ?? { ...connectionFor(spec.backend).status(), toolsets: [] };
        entry.toolsets.push(spec.id);
        out[name] = entry;
      }
      return out;
    },
    /** Ranks toolsets and their tools for a plain-language query. */
    search(query: string, limit?: number): ToolsetHit[] {
      index ??= new ToolsetIndex(
        toolsets.map((t) => ({
          id: t.id,
          description: t.description,
          keywords: t.keywords,
          tools:
            t.tools.length > 0 || !isMcp(t)
              ? t.tools.map((name) => ({ name, description: tools.get(name)?.definition.description ?? '' }))
              : (t.include ?? []).map((name) => ({ name, description: '' })),
        })),
      );
      return index.search(query, limit);
    },
    /**
     * Approves the withheld tools an operator reviewed, each named with the hash the listing showed. One whose
     * definition changed since (another hash now) is not released and comes back in `changedSinceShown`.
     */
    async approve(
      id: string,
      reviewed: readonly { name: string; hash: string }[],
    ): Promise<{ approved: string[]; changedSinceShown: { name: string; hash: string }[] }> {
      const rt = runtimes.get(id);
      if (!rt) throw new CatalogError(`Unknown toolset ${id}`);
      const find = (n: string) => rt.withheld.find((w) => w.exposed === n || w.name === n);
      const unknown = reviewed.filter((r) => !find(r.name)).map((r) => r.name);
      if (unknown.length > 0) {
        const held = rt.withheld.map((w) => w.exposed).join(', ') || 'none';
        throw new CatalogError(`Not withheld in toolset ${id}: ${unknown.join(', ')}; withheld: ${held}`);
      }
      const pending = [];
      const changedSinceShown = [];
      for (const r of reviewed) {
        const w = find(r.name) as (typeof rt.withheld)[number];
        const now = definitionHash(w.definition);
        if (now === r.hash) pending.push(w);
        else changedSinceShown.push({ name: w.exposed, hash: now });
      }
      if (pending.length > 0) {
        await store.pin(
          id,
          pending.map((w) => ({ hash: definitionHash(w.definition), definition: w.definition })),
        );
        await repin(id);
      }
      return { approved: pending.map((w) => w.exposed), changedSinceShown };
    },
    /** Another gateway replica approved tools of toolset `id`: its pins are read again, releasing them here too. */
    repinned: (id: string): Promise<void> => repin(id),
    /**
     * Re-reads the toolset files and swaps the catalog, or throws (CatalogError) and changes nothing. Starts
     * only the servers of new or changed `default` toolsets, as the start does.
     */
    async reload(): Promise<ReloadResult> {
      const source = opts.source;
      if (!source) throw new CatalogError('This gateway was started without a toolsets directory to reload');
      if (reloading) throw new CatalogError('A reload is already running; try again when it ends');
      reloading = true;
      try {
        const result = await inTurn(() =>
          reloadCatalog({
            current: specs,
            load: () => loadToolsets(source, source.vars?.()),
            connections,
            applied,
            nativeRuntimes: (next) => nativeRuntimes(next, backends, 0, compile),
            connectionFor: (spec) => connectionFor(spec),
            mcpRuntime: (spec, listing, persist) => mcpToolsetRuntime(spec, listing, persist),
            dropToolset: (id) => store.dropToolset(id),
            install,
          }),
        );
        for (const id of [...result.added, ...result.changed]) {
          const spec = specs.find((s) => s.id === id);
          if (!spec?.default || !isMcp(spec)) continue;
          await prepare([id]).catch((err: Error) =>
            result.warnings.push(`toolset ${id} is default but not ready: ${err.message}`),
          );
        }
        return result;
      } finally {
        reloading = false;
      }
    },
    /** Called with the ids of toolsets whose tools changed (listings, approvals, reloads). */
    onChange(listener: (ids: string[]) => void): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    /** Stops every upstream server. */
    async close(): Promise<void> {
      await Promise.all([...connections.values()].map((c) => c.close()));
    },
  };
}
