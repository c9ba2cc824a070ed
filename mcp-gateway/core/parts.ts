import type { Logger } from '../../lib/telemetry/log.ts';
import type { Catalog } from '../catalog/catalog.ts';
import type { Ceiling } from '../ceiling/ceiling.ts';
import type { ListToolsetsResponse } from '../contract.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { GatewayStore } from '../store/interface.ts';

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
