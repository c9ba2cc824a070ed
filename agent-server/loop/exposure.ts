import type { GatewayTool, ToolsetInfo } from '../../mcp-gateway/contract.ts';
import type { ToolExposure } from '../contract.ts';
import { CODE_NOTE, startingDeclarations } from './code-mode.ts';
import { startingDefinitions } from './dispatch.ts';
import { buildSystemPrompt } from './prompt.ts';

// How one task shows tools to the model (TOOL_EXPOSURE, or `exposure` in execute_task), and what a dispatch
// task remembers: which tools' definitions the conversation already holds, so each enters it once.

/** A task's exposure mode and its memory of the definitions shown so far. */
export interface Exposure {
  mode: ToolExposure;
  /** Dispatch, code: tools whose definitions are in the conversation already (the system prompt or a result). */
  shown: Set<string>;
  /** Reads back a result moved out of the model's view (context.ts read_stored_result), when one was. */
  readStored?: (args: Record<string, unknown>) => string | undefined;
}

/** A fresh exposure for a task. */
export function createExposure(mode: ToolExposure = 'native'): Exposure {
  return { mode, shown: new Set() };
}

/** What a dispatch task is told beside the catalog: how its fixed tools array works. */
const DISPATCH_NOTE =
  'In this task the tools array stays fixed at manage_toolsets and call_tool. A toolset you activate makes ' +
  'its tools usable through call_tool {"name": <tool>, "arguments": {…}}; the activation result gives each new ' +
  'tool’s description and input schema.';

/**
 * The fixed system prompt of a task: the catalog, and for dispatch (code) how call_tool (run_code) works plus the
 * definitions (declarations) of the tools already active when the task starts (they would otherwise never be shown).
 * `autoActivate`: the gateway activates a called tool's inactive toolset (AUTO_ACTIVATE), so the catalog names tools.
 */
export function systemPromptFor(
  exposure: Exposure,
  catalog: readonly ToolsetInfo[],
  usable: readonly GatewayTool[],
  autoActivate = false,
): string {
  const base = buildSystemPrompt(catalog, autoActivate);
  if (exposure.mode === 'code')
    return `${base}\n\n${CODE_NOTE}${startingDeclarations(usable, exposure.shown)}`;
  if (exposure.mode !== 'dispatch') return base;
  return `${base}\n\n${DISPATCH_NOTE}${startingDefinitions(usable, exposure.shown)}`;
}
