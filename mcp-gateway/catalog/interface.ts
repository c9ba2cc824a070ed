import type { McpConnection, UpstreamStatus } from '../backends/mcp-connection.ts';
import type { CatalogTool } from './build.ts';
import type { Toolset, ToolsetStatus } from './catalog-types.ts';
import type { ReloadResult } from './reload.ts';
import type { ToolsetHit } from './search.ts';

/**
 * The loaded catalog the gateway's rules read from: toolsets, their tools, the upstream servers behind them.
 * buildCatalog (catalog.ts) builds it from the toolset files and the backends.
 */
export interface Catalog {
  readonly toolsets: Toolset[];
  toolset(id: string): Toolset | undefined;
  readonly tools: Map<string, CatalogTool>;
  /** Connects the upstreams of these toolsets and refreshes their tools; throws when one cannot offer any. */
  prepare(ids: readonly string[]): Promise<void>;
  /** Deactivated for `forUser` (`user:<id>`): an OAuth toolset that says revoke_on_deactivate drops their grant. */
  release(ids: readonly string[], forUser: string): Promise<void>;
  /** The upstream connection of an MCP-backed toolset (for a fixed view's prompts and resources). */
  upstream(id: string): McpConnection | undefined;
  /** Before a call: reconnects the tool's upstream if it is not up, so pins are current. Never throws. */
  refreshFor(toolName: string): Promise<void>;
  /** Why a tool is withheld, for the refusal message; undefined when it is not. */
  withheld(toolName: string): string | undefined;
  status(id: string): ToolsetStatus | undefined;
  /** Every upstream server: its state and the toolsets it serves. */
  upstreams(): Record<string, UpstreamStatus & { toolsets: string[] }>;
  /** Ranks toolsets and their tools for a plain-language query. */
  search(query: string, limit?: number): ToolsetHit[];
  /** Discovery's terms learned from use, per toolset (catalog/learned.ts): the index is rebuilt when they change. */
  setLearned(learned: ReadonlyMap<string, readonly string[]>): void;
  /**
   * Approves the withheld tools an operator reviewed, each named with the hash the listing showed. One whose
   * definition changed since (another hash now) is not released and comes back in `changedSinceShown`.
   */
  approve(
    id: string,
    reviewed: readonly { name: string; hash: string }[],
  ): Promise<{ approved: string[]; changedSinceShown: { name: string; hash: string }[] }>;
  /** Another gateway replica approved tools of toolset `id`: its pins are read again. */
  repinned(id: string): Promise<void>;
  /** Re-reads the toolset files and swaps the catalog, or throws (CatalogError) and changes nothing. */
  reload(): Promise<ReloadResult>;
  /** Called with the ids of toolsets whose tools changed (listings, approvals, reloads); returns the unsubscribe. */
  onChange(listener: (ids: string[]) => void): () => void;
  /** Stops every upstream server. */
  close(): Promise<void>;
}
