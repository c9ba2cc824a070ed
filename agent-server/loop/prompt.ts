import type { ToolsetInfo } from '../../mcp-gateway/contract.ts';

/** Tool names a toolset's line shows at most; LIST shows the rest. */
const NAMES_SHOWN = 30;

/**
 * A toolset's tools as far as they are known (a server not started yet has not listed them); with `named`, by
 * name, so the model can call one directly and have its toolset activated for the call.
 */
function toolsOf(t: ToolsetInfo, named: boolean): string {
  if (t.tools.length === 0 && t.health === 'idle') return 'its tools are listed when it is activated';
  const count = `${t.tools.length} tool${t.tools.length === 1 ? '' : 's'}`;
  if (!named || t.tools.length === 0) return count;
  const more = t.tools.length - NAMES_SHOWN;
  return `${count}: ${t.tools.slice(0, NAMES_SHOWN).join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/**
 * The fixed system prompt of a task: built once from the catalog at the task's start, never changed after.
 * `autoActivate`: the gateway activates an inactive toolset for a call of one of its tools (AUTO_ACTIVATE).
 */
export function buildSystemPrompt(catalog: readonly ToolsetInfo[], autoActivate = false): string {
  const lines = catalog
    .filter((t) => t.enabled)
    .map((t) => `- ${t.id}: ${t.description} (${toolsOf(t, autoActivate)})`);
  return [
    'You are toolshift, an agent that completes the user’s task by calling tools.',
    'You start with few tools. Toolsets bring more: call manage_toolsets with action ACTIVATE and the toolset ids ' +
      'you need, use the tools they add, and DEACTIVATE toolsets once you are done with them so that later steps ' +
      'carry only the tools they need. LIST shows a toolset’s tools (optionally filtered by a query).',
    ...(autoActivate
      ? [
          'You may also call a tool named below directly: its toolset is activated for that call when no approval ' +
            'is needed, and its tools stay offered after.',
        ]
      : []),
    '',
    'Toolsets:',
    ...(lines.length > 0 ? lines : ['- (none available)']),
    '',
    'When a tool answers with an error, read it and correct the call. When the task is done, reply with the ' +
      'final answer and no tool calls.',
  ].join('\n');
}
