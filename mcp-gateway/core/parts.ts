import type { Logger } from '../../lib/log.ts';
import type { Catalog } from '../catalog/catalog.ts';
import type { Ceiling } from '../ceiling/ceiling.ts';
import type { ListToolsetsResponse } from '../contract.ts';
import type { GatewayStore } from '../store/store.ts';

/** What the gateway's parts share with it. */
export interface GatewayParts {
  catalog: Catalog;
  store: GatewayStore;
  log: Logger;
  ceiling: Ceiling;
  listToolsets(sessionId?: string): ListToolsetsResponse;
  validIds(): string;
}
