import { AUTO_EXPOSURE_TOKENS } from '../../lib/config/config-schema.ts';
import type { ListToolsetsResponse } from '../../mcp-gateway/contract.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import { activateBeforeStart } from './prime.ts';
import type { Emit } from './tool-step.ts';
import { allToolsetsTokens } from './turn.ts';

// exposure "auto", the default: a small catalog is cheaper loaded whole than managed — every request carries all
// its tools, and no turn goes to manage_toolsets — while a large one is cheaper dynamic. Which is which is a
// number of tool-definition tokens: where the bench's tasks cost the same both ways (`npm run bench` prints the
// crossover; bench/crossover.ts). Below it the task starts with every enabled toolset active (through the
// gateway's manage_toolsets, judged like the model's own ACTIVATE); above it, or when a toolset's definitions
// are not known yet (an upstream server never started), it runs dynamic, with priming and activation without a
// turn. Either way the task then runs native: the tools array follows the session.

export { AUTO_EXPOSURE_TOKENS };

/**
 * Loads every enabled toolset when together they fit under `threshold`: the ids it activated, and the catalog
 * as it read it (still the session's when it activated nothing, so the caller need not read it again).
 */
export async function loadAllIfSmall(
  sessionId: string,
  gateway: GatewayClient,
  meta: number,
  threshold: number,
  emit: Emit,
  signal?: AbortSignal,
): Promise<{ loaded: string[]; listing: ListToolsetsResponse }> {
  const listing = await gateway.listToolsets(sessionId, undefined, signal);
  const all = allToolsetsTokens(listing.toolsets, meta);
  if (all.unknown.length > 0 || all.known > threshold) return { loaded: [], listing };
  const inactive = listing.toolsets.filter((t) => t.enabled && !t.active).map((t) => t.id);
  if (inactive.length === 0) return { loaded: [], listing };
  const loaded = await activateBeforeStart(inactive, sessionId, gateway, emit, 'all_loaded', signal);
  return { loaded, listing };
}
