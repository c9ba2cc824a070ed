import type { Tool } from '@modelcontextprotocol/server';
import { CALL_TOOL, callToolDefinition, MANAGE_TOOLSETS, manageToolsetsDefinition } from '../contract.ts';
import { HandleError } from './handles.ts';

// The MCP face's meta-tools as each leg serves them (manage_toolsets with or without the handle, call_tool),
// from the one definition in the contract, and how call_tool's arguments are read.

const objectSchema = (properties: Record<string, unknown>, required: string[]): Tool['inputSchema'] =>
  ({
    type: 'object',
    properties,
    required,
    additionalProperties: false,
  }) as Tool['inputSchema'];

/** The meta-tool as the modern leg serves it: the agent's definition plus the session handle. */
export function modernManageTool(idleText: string): Tool {
  const base = manageToolsetsDefinition.parameters;
  return {
    name: MANAGE_TOOLSETS,
    description:
      `${manageToolsetsDefinition.description} ACTIVATE without \`session\` starts a new session and returns its ` +
      'handle; pass that handle as `session` to every later manage_toolsets and call_tool of the conversation. ' +
      `The result lists the full definitions of the tools now usable through call_tool. A handle expires after ${idleText} without use.`,
    inputSchema: objectSchema(
      {
        ...base.properties,
        session: {
          type: 'string',
          description: 'The session handle from an earlier ACTIVATE (omit to start one).',
        },
      },
      [...base.required],
    ),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  };
}

export function callTool(modern: boolean): Tool {
  const properties: Record<string, unknown> = {
    ...callToolDefinition.parameters.properties,
    session: {
      type: 'string',
      description: modern
        ? 'The session handle from manage_toolsets.'
        : 'A session handle from an earlier manage_toolsets result, also of an earlier connection (omit to use this connection’s).',
    },
  };
  return {
    name: CALL_TOOL,
    description: callToolDefinition.description,
    inputSchema: objectSchema(properties, modern ? ['session', 'name'] : ['name']),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  };
}

/** The meta-tool as the legacy leg serves it: the agent's definition plus an optional handle. */
export function legacyManageTool(idleText: string): Tool {
  const base = manageToolsetsDefinition.parameters;
  return {
    name: MANAGE_TOOLSETS,
    description:
      `${manageToolsetsDefinition.description} Tools of activated toolsets are added to this connection's tool list. ` +
      'ACTIVATE and DEACTIVATE return a `session` handle: pass it as `session` to manage_toolsets or call_tool ' +
      `in a later connection to act on the same toolsets. A handle expires after ${idleText} without use.`,
    inputSchema: objectSchema(
      {
        ...base.properties,
        session: {
          type: 'string',
          description:
            'A session handle from an earlier result, also of an earlier connection (omit to use this connection’s).',
        },
      },
      [...base.required],
    ),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  };
}

/** Refuses a string argument longer than `max`, naming it, the limit and the length seen (never echoing it). */
export function checkLength(field: string, value: string, max: number): void {
  if (value.length > max)
    throw new HandleError(`\`${field}\` must be at most ${max} characters (got ${value.length})`);
}

export function callArgs(args: Record<string, unknown>): {
  name: string;
  arguments: Record<string, unknown>;
} {
  const { name, arguments: toolArgs } = args;
  if (typeof name !== 'string' || name === '') {
    throw new HandleError('call_tool needs `name`: the tool to run (manage_toolsets lists them)');
  }
  checkLength('name', name, TOOL_NAME_MAX);
  if (
    toolArgs !== undefined &&
    (typeof toolArgs !== 'object' || toolArgs === null || Array.isArray(toolArgs))
  ) {
    throw new HandleError('call_tool’s `arguments` must be a JSON object with the tool’s parameters');
  }
  return { name, arguments: (toolArgs ?? {}) as Record<string, unknown> };
}

/** The longest tool name accepted (as on POST /mcp/tools/{name}/call). */
export const TOOL_NAME_MAX = 256;
