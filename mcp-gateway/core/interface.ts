import type { McpConnection, UpstreamStatus } from '../backends/mcp-connection.ts';
import type { ReloadResult } from '../catalog/reload.ts';
import type { Approval } from '../ceiling/approvals.ts';
import type { Ceiling } from '../ceiling/ceiling.ts';
import type {
  AuditSearch,
  CallToolResponse,
  ChangeDefaultsRequest,
  ChangeDefaultsResponse,
  ChangeToolsetsRequest,
  ChangeToolsetsResponse,
  GatewayTool,
  ListToolsetsResponse,
  ManageToolsetsResponse,
  ToolsetInfo,
} from '../contract.ts';
import type { AuditPage, AuditRow } from '../store/audit.ts';
import type { InSight } from './audit-search.ts';
import type { CallIdentity } from './keyed-calls.ts';

/**
 * The gateway's rules, the one set the REST routes and the MCP face both call (createGateway, gateway.ts):
 * sessions and their toolsets, the user's defaults, tool calls, fixed views, and the operator's actions.
 * Refusals are thrown as Refusal (refusals.ts).
 */
export interface Gateway {
  /** The catalog with each toolset's state in a session; ranked by `query` when one is given. */
  listToolsets(sessionId?: string, query?: string): Promise<ListToolsetsResponse>;
  /** Activates or deactivates toolsets in a session, or enables or disables them for everyone. */
  changeToolsets(req: ChangeToolsetsRequest): Promise<ChangeToolsetsResponse>;
  /** Changes which toolsets new sessions start with. */
  changeDefaults(req: ChangeDefaultsRequest): Promise<ChangeDefaultsResponse>;
  /**
   * The tools a session may call now, from one read of it. The upstream servers of its active toolsets that have
   * not listed their tools yet (a default another replica made, or one made before this process started) are
   * started and listed first; one that cannot start is logged and left out.
   */
  tools(sessionId?: string): Promise<GatewayTool[]>;
  /** A toolset's tool definitions as offered (undefined: no such toolset); starts no upstream server. */
  toolsetTools(toolsetId: string): GatewayTool[] | undefined;
  /**
   * Runs a tool for a session: only an active, enabled tool, with valid arguments, within the ceiling. A tool of
   * an inactive toolset activates it first when the model's own ACTIVATE would pass without a human (`activated`).
   */
  callTool(
    sessionId: string,
    name: string,
    args: Record<string, unknown>,
    call?: CallIdentity,
  ): Promise<CallToolResponse>;
  /** A worker took a task over under `fence`: calls sent under a lower one are refused; the highest seen. */
  announceFence(taskId: string, fence: number): Promise<number>;
  /** The meta-tool with a model's raw arguments; a session's changes run one at a time. */
  manageToolsets(sessionId: string, args: Record<string, unknown>): Promise<ManageToolsetsResponse>;
  /** The upstream server behind an MCP-backed toolset, if it is one. */
  upstream(toolsetId: string): McpConnection | undefined;
  /** A fixed view's read of its upstream's prompts or resources, checked and audited on every request. */
  viewUpstream(sessionId: string, toolsetId: string, what: string): Promise<McpConnection>;
  /**
   * Before every request to a fixed view: refuses when one of its toolsets is unknown, disabled or denied;
   * answers those not active in the view's session.
   */
  checkView(sessionId: string, ids: readonly string[]): Promise<string[]>;
  /** Deletes a session that ended, with its active toolsets and its limits' counters. */
  endSession(sessionId: string): Promise<void>;
  /** Upstream MCP servers and their state, for /health. */
  upstreams(): Record<string, UpstreamStatus & { toolsets: string[] }>;
  /** The operator's ceiling: policy, approvals, limits. */
  readonly ceiling: Ceiling;
  /** Approves or denies a pending approval, audited with who decided. */
  decideApproval(id: string, approve: boolean, by: string, reason?: string): Promise<Approval>;
  /** Audit rows the search matches, newest first, a page at a time. */
  listAudit(search: AuditSearch & InSight & { cursor?: string; limit: number }): Promise<AuditPage>;
  /** Every audit row the search matches, newest first, a page at a time (an export). */
  exportAudit(search: AuditSearch & InSight): AsyncGenerator<AuditRow[]>;
  /** Calls `listener` with the ids of toolsets whose tools changed; returns the unsubscribe. */
  onCatalogChange(listener: (ids: string[]) => void): () => void;
  /** Releases an upstream toolset's withheld tools an operator reviewed (by the hashes shown). */
  approveToolset(
    id: string,
    reviewed: readonly { name: string; hash: string }[],
  ): Promise<{
    toolset_id: string;
    approved: string[];
    changed_since_shown: { name: string; hash: string }[];
    toolset: ToolsetInfo | undefined;
  }>;
  /** Re-reads the toolset files; an invalid directory changes nothing. */
  reloadToolsets(): Promise<ReloadResult>;
}
