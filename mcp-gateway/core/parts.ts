import type { Logger } from '../../lib/telemetry/log.ts';
import type { TokenCounter } from '../../lib/telemetry/tokens.ts';
import type { Catalog } from '../catalog/catalog.ts';
import type { Ceiling } from '../ceiling/ceiling.ts';
import type { ListToolsetsResponse, ManageToolsetsResponse } from '../contract.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { CallKeyQueries, GatewayStore } from '../store/interface.ts';

/** What the gateway's rules share (createGateway builds it once): its collaborators, its audit and its counter. */
export interface GatewayCore {
  catalog: Catalog;
  store: GatewayStore;
  log: Logger;
  /** The operator's policy, approvals and rate limits (ceiling.ts), checked on every path. */
  ceiling: Ceiling;
  /** The record of keyed calls and tasks' fences (store/call-keys.ts); without it keys are not honoured. */
  callKeys?: CallKeyQueries;
  /** Counts tool-definition tokens for manage_toolsets results and the budget. */
  counter: TokenCounter;
  /** Audits with the request's actor. */
  audit(entry: AuditEntry): void;
  /**
   * The toolsets the request's user may not use by their teams' ceilings (each with the team that said so);
   * empty for a request on nobody's behalf.
   */
  teamDisabled(): Promise<ReadonlyMap<string, string>>;
  /** ACTIVATE of one toolset (or some of its tools) as the model's manage_toolsets does it; absent with AUTO_ACTIVATE=false. */
  activate?(sessionId: string, toolsetId: string, tools?: string[]): Promise<ManageToolsetsResponse>;
}

/** What the gateway's parts share with it. */
export interface GatewayParts {
  catalog: Catalog;
  store: GatewayStore;
  /** Audits with the request's actor. */
  audit(entry: AuditEntry): void;
  log: Logger;
  ceiling: Ceiling;
  listToolsets(sessionId?: string): Promise<ListToolsetsResponse>;
  validIds(): string;
}
