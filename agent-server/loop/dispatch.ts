import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { CALL_TOOL, callToolDefinition, type GatewayTool } from '../../mcp-gateway/contract.ts';

// TOOL_EXPOSURE=dispatch, the agent's copy of the MCP face's modern leg: the model's tools array is always
// `[manage_toolsets, call_tool]`, so no activation changes the prompt's prefix (providers cache by exact
// prefix, and tools come first). An activation's result carries the definitions of the tools it made usable,
// so they enter the conversation once, after the cached prefix; call_tool runs them through the gateway's call
// route, which still refuses inactive tools and checks the arguments against the tool's real schema.

export { CALL_TOOL };

/** The dispatcher as the model sees it (the MCP face's call_tool, without the handle: the task has a session). */
export const callToolTool: ChatCompletionTool = {
  type: 'function',
  function: {
    name: callToolDefinition.name,
    description: callToolDefinition.description,
    parameters: callToolDefinition.parameters as unknown as Record<string, unknown>,
  },
};

/** The tool a call_tool call names, or what is wrong with it (text the model can act on). */
export function dispatchTarget(
  args: Record<string, unknown>,
  reserved: readonly string[],
): { name: string; arguments: Record<string, unknown> } | { error: string } {
  const { name, arguments: toolArgs, ...rest } = args;
  const extra = Object.keys(rest);
  if (extra.length > 0) {
    return {
      error: `call_tool takes only {name, arguments}; remove ${extra.join(', ')} (put the tool's own parameters inside arguments)`,
    };
  }
  if (typeof name !== 'string' || name.trim() === '') {
    return { error: 'call_tool needs `name`: the tool to run, as named in manage_toolsets results' };
  }
  if (reserved.includes(name)) {
    return { error: `${name} is not run through call_tool; call ${name} directly` };
  }
  if (
    toolArgs !== undefined &&
    (typeof toolArgs !== 'object' || toolArgs === null || Array.isArray(toolArgs))
  ) {
    return {
      error: `call_tool’s \`arguments\` must be a JSON object with ${name}'s parameters, not ${JSON.stringify(toolArgs)}`,
    };
  }
  return { name, arguments: (toolArgs ?? {}) as Record<string, unknown> };
}

/** What the model is told when it calls a tool by name instead of through call_tool. */
export function notOffered(name: string): string {
  return (
    `Error: ${name} is not offered directly in this task; run it with call_tool: ` +
    `{"name": "${name}", "arguments": {…its parameters…}}`
  );
}

/** A tool's definition as an activation result shows it: what a native tools entry would carry. */
export interface ShownDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * Adds to a manage_toolsets result the definitions of the session's tools the conversation has not seen yet
 * (`shown` remembers them, and is updated), and names the ones whose definitions came earlier.
 */
export function withDefinitions(
  result: Record<string, unknown>,
  usable: readonly GatewayTool[],
  shown: Set<string>,
): Record<string, unknown> {
  const fresh = usable.filter((t) => !shown.has(t.name));
  const earlier = usable.filter((t) => shown.has(t.name)).map((t) => t.name);
  for (const t of fresh) shown.add(t.name);
  const tools: ShownDefinition[] = fresh.map((t) => ({
    name: t.name,
    description: t.description,
    parameters: t.parameters,
  }));
  return {
    ...result,
    ...(usable.length > 0
      ? {
          how_to_call:
            'Run these tools with call_tool {"name": <tool>, "arguments": {…}}; only tools of active toolsets run.',
        }
      : {}),
    ...(tools.length > 0 ? { tools } : {}),
    ...(earlier.length > 0 ? { also_usable: earlier } : {}),
  };
}

/**
 * The part of a dispatch task's system prompt that lists tools already usable when it starts (default
 * toolsets, or a continued session), so the model has their definitions without an activation.
 */
export function startingDefinitions(usable: readonly GatewayTool[], shown: Set<string>): string {
  if (usable.length === 0) return '';
  for (const t of usable) shown.add(t.name);
  const defs = usable.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
  return `\n\nTools usable now through call_tool (toolsets already active):\n${JSON.stringify(defs)}`;
}

/**
 * The tool a call is about, for events: call_tool's `name` (a code task's run_code's `tool`) when it gives one,
 * else the call's own name.
 */
export function calledName(call: { function: { name: string; arguments: unknown } }): string {
  const field = { [CALL_TOOL]: 'name', run_code: 'tool' }[call.function.name];
  if (!field) return call.function.name;
  try {
    const raw = call.function.arguments;
    const args = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Record<string, unknown> | null;
    const named = args?.[field];
    return typeof named === 'string' && named !== '' ? named : call.function.name;
  } catch {
    return call.function.name;
  }
}
