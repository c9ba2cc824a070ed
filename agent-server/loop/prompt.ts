import type { ToolsetInfo } from '../../mcp-gateway/contract.ts';

/** How many tools a toolset has, as far as is known: a server not started yet has not listed them. */
function toolCount(t: ToolsetInfo): string {
  if (t.tools.length === 0 && t.health === 'idle') return 'its tools are listed when it is activated';
  return `${t.tools.length} tool${t.tools.length === 1 ? '' : 's'}`;
}

/** The fixed system prompt of a task: built once from the catalog at the task's start, never changed after. */
export function buildSystemPrompt(catalog: readonly ToolsetInfo[]): string {
  const lines = catalog.filter((t) => t.enabled).map((t) => `- ${t.id}: ${t.description} (${toolCount(t)})`);
  return [
    'You are toolshift, an agent that completes the user’s task by calling tools.',
    'You start with few tools. Toolsets bring more: call manage_toolsets with action ACTIVATE and the toolset ids ' +
      'you need, use the tools they add, and DEACTIVATE toolsets once you are done with them so that later steps ' +
      'carry only the tools they need. LIST shows a toolset’s tools (optionally filtered by a query).',
    '',
    'Toolsets:',
    ...(lines.length > 0 ? lines : ['- (none available)']),
    '',
    'When a tool answers with an error, read it and correct the call. When the task is done, reply with the ' +
      'final answer and no tool calls.',
  ].join('\n');
}
