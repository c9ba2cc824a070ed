import { LIMITS } from '../../lib/http/limits.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import { runManageToolsets } from './manage-toolsets.ts';
import type { Emit } from './tool-step.ts';
import { throwIfStopped } from './tool-step.ts';

// Goal-primed toolsets: before a task's first model call, the toolset discovery is certain the goal needs is
// activated, so the model's first turn can use it instead of spending a turn (a model call, with its latency)
// on manage_toolsets. Certain is the gateway's ranking rule (mcp-gateway/catalog/search.ts: the first hit leads
// the second by the margin at which no tuning need was wrong). It goes through the gateway's manage_toolsets
// like a model's own call — the operator's ceiling, policy and token budget judge it, and it is audited as the
// task's — and anything but a plain yes (a refusal, a policy that asks a human) leaves the task as it was: a
// guess never pauses a task. The model is told, and may deactivate it.

/** Activates the toolset the goal certainly needs, if any; returns the ids activated. */
export async function primeToolsets(
  goal: string,
  sessionId: string,
  gateway: GatewayClient,
  emit: Emit,
  signal?: AbortSignal,
): Promise<string[]> {
  let top: { id: string; certain?: boolean; active: boolean; enabled: boolean } | undefined;
  try {
    top = (await gateway.listToolsets(sessionId, goal.slice(0, LIMITS.query), signal)).toolsets[0];
  } catch {
    throwIfStopped(signal);
    return [];
  }
  if (!top?.certain || top.active || !top.enabled) return [];
  return activateBeforeStart([top.id], sessionId, gateway, emit, 'primed', signal);
}

/**
 * Activates toolsets for a task before its first model call, through the gateway's manage_toolsets like a
 * model's own call; `mark` says why on the toolset_change event. Anything but a plain yes leaves the task as
 * it was. Returns the ids activated.
 */
export async function activateBeforeStart(
  ids: string[],
  sessionId: string,
  gateway: GatewayClient,
  emit: Emit,
  mark: 'primed' | 'all_loaded',
  signal?: AbortSignal,
): Promise<string[]> {
  try {
    const outcome = await runManageToolsets(
      { action: 'ACTIVATE', toolset_ids: ids },
      sessionId,
      gateway,
      signal,
    );
    if (!outcome.change) return [];
    emit('toolset_change', {
      step: 0,
      tool_call_id: mark,
      ...outcome.change,
      ...(outcome.toolTokens ? { tool_definition_tokens: outcome.toolTokens } : {}),
      [mark]: true,
    });
    return ids;
  } catch {
    throwIfStopped(signal);
    // Refused (disabled, over the budget, an approval the policy asks for, …): the model decides itself.
    return [];
  }
}

/** What the model is told under its goal about toolsets activated for it. */
export function primedNote(primed: readonly string[]): string {
  if (primed.length === 0) return '';
  return (
    `\n\n(toolshift activated ${primed.join(', ')} for this goal: its tools are offered. ` +
    'DEACTIVATE it with manage_toolsets if you do not need it.)'
  );
}
