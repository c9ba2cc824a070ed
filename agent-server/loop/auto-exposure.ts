import { AUTO_EXPOSURE_TOKENS } from '../../lib/config/config-schema.ts';
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

/** Loads every enabled toolset when together they fit under `threshold`; returns the ids it activated. */
export async function loadAllIfSmall(
  sessionId: string,
  gateway: GatewayClient,
  meta: number,
  threshold: number,
  emit: Emit,
  signal?: AbortSignal,
): Promise<string[]> {
  const { toolsets } = await gateway.listToolsets(sessionId, undefined, signal);
  const all = allToolsetsTokens(toolsets, meta);
  if (all.unknown.length > 0 || all.known > threshold) return [];
  const inactive = toolsets.filter((t) => t.enabled && !t.active).map((t) => t.id);
  if (inactive.length === 0) return [];
  return activateBeforeStart(inactive, sessionId, gateway, emit, 'all_loaded', signal);
}
