import { createLogger } from '../../lib/telemetry/log.ts';
import type { Backend } from '../backends/backend.ts';
import type { McpConnection } from '../backends/mcp-connection.ts';
import { nativeRuntimes, schemaCompiler } from './build.ts';
import { approve, reload } from './catalog-changes.ts';
import { search, toolsetStatus, upstreams, withheldReason } from './catalog-reads.ts';
import {
  type CatalogState,
  closeOwn,
  connectionFor,
  install,
  isMcp,
  mcpToolsetRuntime,
  prepare,
  repin,
} from './catalog-state.ts';
import { memoryPinStore } from './pins.ts';
import type { ToolsetSpec } from './toolset-files.ts';

// The live toolset catalog: toolset files joined with what their backends serve. Native toolsets are
// checked at start; upstream MCP servers connect on first activation (or at start when a toolset is
// `default`), and their listings pass through the pins before any tool is offered. A toolset whose tool
// names another already offers is skipped (it offers nothing and says why); the rest load. Reload swaps the
// whole catalog at once, or not at all, and starts no server the start would not have started. What the
// catalog keeps, and the changes its parts make, are catalog-state.ts's; its reports catalog-reads.ts's; the
// operator's changes (approvals, reloads) catalog-changes.ts's.

export type { CatalogTool, GatewayToolDefinition } from './build.ts';
export type { CatalogOptions, Toolset, ToolsetStatus } from './catalog-types.ts';

import type { CatalogOptions } from './catalog-types.ts';

export { CatalogError, loadToolsetFiles, loadToolsets, type ToolsetSpec } from './toolset-files.ts';

import type { Catalog } from './interface.ts';
import { sameTerms } from './learned.ts';

export type { Catalog };

/** Joins toolset files with the backends' tool lists; refuses a native tool or backend that does not exist. */
export async function buildCatalog(
  initial: ToolsetSpec[],
  backends: Record<string, Backend>,
  opts: CatalogOptions = {},
): Promise<Catalog> {
  const log = opts.log ?? createLogger('mcp-gateway', 'silent');
  const st: CatalogState = {
    opts,
    backends,
    log,
    store: opts.store ?? memoryPinStore(),
    compile: schemaCompiler((message) => log.warn({ message }, 'a tool schema does not compile')),
    connections: new Map(),
    personal: new Map(),
    applied: new WeakMap(),
    listeners: new Set(),
    specs: [],
    runtimes: new Map(),
    toolsets: [],
    byId: new Map(),
    tools: new Map(),
    withheldByName: new Map(),
    index: undefined,
    learned: new Map(),
    reloading: false,
    tail: Promise.resolve(),
  };
  // Start: native toolsets checked against their backends; MCP toolsets from their stored listings.
  const startRuntimes = await nativeRuntimes(initial, backends, opts.waitMs ?? 0, st.compile);
  for (const spec of initial)
    if (isMcp(spec)) startRuntimes.set(spec.id, await mcpToolsetRuntime(st, spec, null, false));
  for (const rt of install(st, initial, startRuntimes, [])) {
    if (rt.error) log.warn({ toolset: rt.spec.id, reason: rt.error }, 'toolset skipped: it offers no tools');
  }
  for (const spec of initial.filter((s) => s.default && isMcp(s))) {
    await prepare(st, [spec.id]).catch((err) =>
      log.warn({ toolset: spec.id, err: err.message }, 'default toolset not ready'),
    );
  }
  return {
    get toolsets() {
      return st.toolsets;
    },
    toolset: (id) => st.byId.get(id),
    get tools() {
      return st.tools;
    },
    prepare: (ids) => prepare(st, ids),
    /** Deactivated for `forUser`: an OAuth toolset that says revoke_on_deactivate drops their grant. */
    async release(ids: readonly string[], forUser: string): Promise<void> {
      for (const id of ids) {
        const spec = st.specs.find((s) => s.id === id);
        if (!spec || !isMcp(spec) || !spec.backend.oauth?.revokeOnDeactivate || !st.opts.grants) continue;
        await st.opts.grants.drop(forUser, id, 'deactivated (revoke_on_deactivate)');
        await closeOwn(st, spec, forUser);
      }
    },
    /** The upstream connection of an MCP-backed toolset (for a fixed view's prompts and resources). */
    upstream(id: string): McpConnection | undefined {
      const spec = st.specs.find((s) => s.id === id);
      return spec && isMcp(spec) ? connectionFor(st, spec.backend) : undefined;
    },
    /** Before a call: reconnects the tool's upstream if it is not up, so pins are current. Never throws. */
    async refreshFor(toolName: string): Promise<void> {
      const owner = st.tools.get(toolName)?.toolset ?? st.withheldByName.get(toolName)?.toolset;
      const spec = owner ? st.specs.find((s) => s.id === owner) : undefined;
      if (!spec || !isMcp(spec) || connectionFor(st, spec.backend).status().state === 'up') return;
      await prepare(st, [spec.id]).catch(() => {});
    },
    withheld: (toolName) => withheldReason(st, toolName),
    status: (id) => toolsetStatus(st, id),
    upstreams: () => upstreams(st),
    search: (query, limit) => search(st, query, limit),
    setLearned(learned) {
      if (sameTerms(st.learned, learned)) return;
      st.learned = learned;
      st.index = undefined;
    },
    approve: (id, reviewed) => approve(st, id, reviewed),
    /** Another gateway replica approved tools of toolset `id`: its pins are read again, releasing them here too. */
    repinned: (id) => repin(st, id),
    reload: () => reload(st),
    onChange(listener: (ids: string[]) => void): () => void {
      st.listeners.add(listener);
      return () => st.listeners.delete(listener);
    },
    /** Stops every upstream server. */
    async close(): Promise<void> {
      await Promise.all([...st.connections.values(), ...st.personal.values()].map((c) => c.close()));
    },
  };
}
