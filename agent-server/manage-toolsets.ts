import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { z } from 'zod';
import { describeIssues } from '../lib/http.ts';
import type { GatewayClient } from './gateway-client.ts';

/** The meta-tool's name; the loop intercepts calls to it instead of routing them to the gateway's call route. */
export const MANAGE_TOOLSETS = 'manage_toolsets';

/** The seed design's schema, plus a compatible LIST action with an optional query. */
export const manageToolsetsTool: ChatCompletionTool = {
  type: 'function',
  function: {
    name: MANAGE_TOOLSETS,
    description:
      'Activates or deactivates sets of tools to manage context and capabilities. Use this to acquire new tools ' +
      'for a task or to dismiss tools that are no longer needed. LIST shows the toolsets (optionally only those ' +
      'matching a query) with their tools and whether each is active.',
    parameters: {
      type: 'object',
      properties: {
        action: {
          type: 'string',
          enum: ['ACTIVATE', 'DEACTIVATE', 'LIST'],
          description: 'The action to perform.',
        },
        toolset_ids: {
          type: 'array',
          items: { type: 'string' },
          description: "A list of toolset identifiers to act upon (e.g., 'web_tools'). Use [] with LIST.",
        },
        query: {
          type: 'string',
          description: 'LIST only: words to look for in toolset ids, descriptions and tool names.',
        },
      },
      required: ['action', 'toolset_ids'],
    },
  },
};

const Args = z
  .object({
    action: z.preprocess(
      (v) => (typeof v === 'string' ? v.trim().toUpperCase() : v),
      z.enum(['ACTIVATE', 'DEACTIVATE', 'LIST']),
    ),
    toolset_ids: z.array(z.string()).optional(),
    query: z.string().optional(),
  })
  .refine((a) => a.action === 'LIST' || (a.toolset_ids?.length ?? 0) > 0, {
    message: 'ACTIVATE and DEACTIVATE need at least one id in toolset_ids',
    path: ['toolset_ids'],
  });

/** What a manage_toolsets call did: the text for the model and, for a change, what changed. */
export interface ManageToolsetsOutcome {
  content: string;
  change?: {
    action: 'ACTIVATE' | 'DEACTIVATE';
    toolset_ids: string[];
    active_toolsets: string[];
    added_tools: string[];
    removed_tools: string[];
  };
}

/** Validates the model's arguments and carries the call out through the gateway's admin API, for this session only. */
export async function runManageToolsets(
  args: unknown,
  sessionId: string,
  gateway: GatewayClient,
): Promise<ManageToolsetsOutcome> {
  const parsed = Args.safeParse(args);
  if (!parsed.success) {
    throw new Error(
      `Invalid arguments for manage_toolsets: ${describeIssues(parsed.error)}. ` +
        'Expected {action: "ACTIVATE"|"DEACTIVATE"|"LIST", toolset_ids: string[], query?: string}',
    );
  }
  const { action, toolset_ids = [], query } = parsed.data;
  if (action === 'LIST') {
    const { toolsets } = await gateway.listToolsets(sessionId, query);
    const shown = toolsets.filter((t) => t.enabled);
    return {
      content: JSON.stringify({
        toolsets: shown.map(({ id, description, active, tools }) => ({ id, description, active, tools })),
        ...(shown.length === 0
          ? { message: `No toolset matches "${query ?? ''}"; LIST without a query shows all.` }
          : {}),
      }),
    };
  }
  const res = await gateway.changeToolsets({ action, toolset_ids, session_id: sessionId });
  const verb = action === 'ACTIVATE' ? 'Activated' : 'Deactivated';
  const changed = toolset_ids.filter((id) => !res.unchanged.includes(id));
  const parts = [
    changed.length > 0 ? `${verb} ${changed.join(', ')}.` : '',
    res.unchanged.length > 0
      ? `${res.unchanged.join(', ')} ${action === 'ACTIVATE' ? 'was already active' : 'was not active'}.`
      : '',
    res.added_tools.length > 0 ? `New tools: ${res.added_tools.join(', ')}.` : '',
    res.removed_tools.length > 0 ? `Tools no longer available: ${res.removed_tools.join(', ')}.` : '',
  ];
  return {
    content: JSON.stringify({
      message: parts.filter(Boolean).join(' '),
      active_toolsets: res.active_toolsets,
      added_tools: res.added_tools,
      removed_tools: res.removed_tools,
    }),
    change: {
      action,
      toolset_ids,
      active_toolsets: res.active_toolsets,
      added_tools: res.added_tools,
      removed_tools: res.removed_tools,
    },
  };
}
