import type { ChatCompletionMessageFunctionToolCall } from 'openai/resources/chat/completions';
import { ServiceError } from '../../lib/http/http-client.ts';
import { type JsonInputError, nestsDeeperThan, parseJson } from '../../lib/http/json.ts';
import { Approval, ManageToolsetsResponse } from '../../mcp-gateway/contract.ts';
import { type GatewayClient, refusalCode } from '../clients/gateway.ts';
import { ToolDefinitionTokens } from '../contract.ts';
import { RUN_CODE, runCode, type ScriptHooks, withDeclarations } from './code-mode.ts';
import { READ_STORED_RESULT } from './context.ts';
import { CALL_TOOL, dispatchTarget, notOffered, withDefinitions } from './dispatch.ts';
import type { Exposure } from './exposure.ts';
import { AnswerLost, callKeyed, type KeyedCall, LOST_ANSWER_ATTEMPTS } from './lost-answer.ts';
import { MANAGE_TOOLSETS, type ManageToolsetsOutcome, runManageToolsets } from './manage-toolsets.ts';

/** One tool call's outcome: the tool message's text, whether it succeeded, and a toolset change if any. */
export interface ToolCallOutcome {
  content: string;
  ok: boolean;
  arguments: unknown;
  /** The tool that ran when it is not the call's own name: the one a dispatch task named in call_tool. */
  tool?: string;
  change?: ManageToolsetsOutcome['change'];
  /** The change was the gateway's: this call's tool was in an inactive toolset, activated for it. */
  automatic?: boolean;
  /** For a change of toolsets: what it did to the tool-definition tokens, as the gateway counted them. */
  toolTokens?: ManageToolsetsOutcome['toolTokens'];
  /** The operator's policy asks a human first: the pending approval the gateway recorded. */
  approval?: Approval;
  /** Refused until the task's owner connects their own account for this toolset: nothing ran. */
  consent?: ConsentAsked;
  /** The call was sent and its answer lost, and its tool is not safe to ask again: its outcome is unknown. */
  lost?: boolean;
}

/** The pending approval a gateway refusal (approval_needed) carries, if it is one. */
function approvalOf(err: unknown): Approval | undefined {
  if (refusalCode(err) !== 'approval_needed') return undefined;
  const parsed = Approval.safeParse(
    ((err as ServiceError).body as { approval?: unknown } | undefined)?.approval,
  );
  return parsed.success ? parsed.data : undefined;
}

/** The activation a refused call made on the way (activation without a turn), if it made one. */
export function activatedOf(err: unknown): ManageToolsetsResponse | undefined {
  if (!(err instanceof ServiceError)) return undefined;
  const parsed = ManageToolsetsResponse.safeParse(
    (err.body as { activated?: unknown } | undefined)?.activated,
  );
  return parsed.success ? parsed.data : undefined;
}

/** What a consent_required refusal names: the toolset, and where the person connects their account. */
export interface ConsentAsked {
  toolset: string;
  connect_url: string | null;
}

/** The toolset a gateway refusal (consent_required) waits for the person to connect, if it is one. */
function consentOf(err: unknown): ConsentAsked | undefined {
  if (refusalCode(err) !== 'consent_required') return undefined;
  const body = (err as ServiceError).body as { toolset?: unknown; connect_url?: unknown } | undefined;
  if (typeof body?.toolset !== 'string') return undefined;
  return {
    toolset: body.toolset.slice(0, 256),
    connect_url: typeof body.connect_url === 'string' ? body.connect_url.slice(0, 2048) : null,
  };
}

/** Parses a tool call's JSON arguments; returns an error text instead of throwing. */
function parseArguments(
  call: ChatCompletionMessageFunctionToolCall,
): { args: Record<string, unknown> } | { error: string } {
  // Some servers hand back arguments already parsed; accept an object as well as a JSON string.
  const given: unknown = call.function.arguments;
  let value: unknown = given;
  if (typeof given === 'string' || given === undefined || given === null) {
    const raw = typeof given === 'string' && given.trim() !== '' ? given : '{}';
    try {
      value = parseJson(raw);
    } catch (err) {
      const e = err as JsonInputError;
      const why = e.kind === 'depth' ? `nest too deeply (${e.detail})` : `are not valid JSON (${e.detail})`;
      return {
        error: `the arguments of ${call.function.name} ${why}; send one JSON object with the tool's parameters`,
      };
    }
  } else if (nestsDeeperThan(given)) {
    return { error: `the arguments of ${call.function.name} nest too deeply; send a flatter JSON object` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return {
      error: `the arguments of ${call.function.name} must be a JSON object, not ${JSON.stringify(value)}`,
    };
  }
  return { args: value as Record<string, unknown> };
}

type Target = { name: string; args: Record<string, unknown>; tool?: string } | { error: string };

/** A dispatch task's call: call_tool names the tool to run; other names than the two offered are refused. */
function dispatched(name: string, args: Record<string, unknown>, mode: Exposure['mode']): Target {
  if (name === MANAGE_TOOLSETS) return { name, args };
  if (mode === 'code') return name === RUN_CODE ? codeTarget(args) : { error: notInCode(name) };
  if (name !== CALL_TOOL) return { error: notOffered(name) };
  const target = dispatchTarget(args, [MANAGE_TOOLSETS, CALL_TOOL]);
  if ('error' in target) return { error: `Error: ${target.error}` };
  return { name: target.name, args: target.arguments, tool: target.name };
}

/** A code task's run_code: a script (`{code}`), or one tool (`{tool, arguments}`), which may wait for a human. */
function codeTarget(args: Record<string, unknown>): Target {
  const { tool, arguments: toolArgs, ...rest } = args;
  if (tool === undefined) return { name: RUN_CODE, args };
  const extra = Object.keys(rest);
  if (extra.length > 0)
    return {
      error: `Error: run_code takes {code} (a script) or {tool, arguments} (one call); remove ${extra.join(', ')}`,
    };
  if (typeof tool !== 'string' || tool.trim() === '' || tool === MANAGE_TOOLSETS || tool === RUN_CODE)
    return {
      error: 'Error: run_code’s `tool` names one tool of an active toolset (not manage_toolsets or run_code)',
    };
  if (
    toolArgs !== undefined &&
    (typeof toolArgs !== 'object' || toolArgs === null || Array.isArray(toolArgs))
  )
    return { error: `Error: run_code’s \`arguments\` must be a JSON object with ${tool}'s parameters` };
  return { name: tool, args: (toolArgs ?? {}) as Record<string, unknown>, tool };
}

const notInCode = (name: string) =>
  `Error: ${name} is not offered directly in this task; call it in a run_code script, or alone as run_code {"tool": "${name}", "arguments": {…}}`;

/**
 * Runs one tool call of the model's reply for `sessionId`: manage_toolsets goes to the gateway's admin API,
 * anything else to the gateway's call route. Every failure becomes an error message the model can read. In a
 * dispatch task (`exposure`), tools run through call_tool and an activation's result carries the definitions
 * of the tools it made usable; in a code task, their declarations, and run_code runs a script (`script` hears
 * each of its calls).
 */
export async function executeToolCall(
  call: ChatCompletionMessageFunctionToolCall,
  sessionId: string,
  gateway: GatewayClient,
  signal?: AbortSignal,
  exposure?: Exposure,
  keyed?: (name: string) => KeyedCall,
  script?: ScriptHooks,
): Promise<ToolCallOutcome> {
  const parsed = parseArguments(call);
  if ('error' in parsed)
    return { content: `Error: ${parsed.error}`, ok: false, arguments: call.function.arguments };
  // The loop's own tool: reads the conversation, nothing leaves the process.
  const stored = call.function.name === READ_STORED_RESULT ? exposure?.readStored?.(parsed.args) : undefined;
  if (stored !== undefined)
    return { content: stored, ok: !stored.startsWith('Error:'), arguments: parsed.args };
  const mode = exposure?.mode ?? 'native';
  const target =
    mode === 'native'
      ? { name: call.function.name, args: parsed.args }
      : dispatched(call.function.name, parsed.args, mode);
  if ('error' in target) return { content: target.error, ok: false, arguments: parsed.args };
  const tool = 'tool' in target ? { tool: target.tool } : {};
  try {
    if (target.name === MANAGE_TOOLSETS) {
      const outcome = await runManageToolsets(target.args, sessionId, gateway, signal);
      let content = outcome.content;
      if (exposure && mode !== 'native' && outcome.change) {
        const usable = outcome.tools ?? (await gateway.tools(sessionId, signal));
        content =
          mode === 'code'
            ? withDeclarations(outcome.result, usable, exposure.shown)
            : JSON.stringify(withDefinitions(outcome.result, usable, exposure.shown));
      }
      return {
        content,
        ok: true,
        arguments: target.args,
        change: outcome.change,
        toolTokens: outcome.toolTokens,
      };
    }
    if (mode === 'code' && target.name === RUN_CODE && !('tool' in target)) {
      const ran = await runCode(target.args, {
        sessionId,
        gateway: gateway.scripted(),
        signal,
        ...(keyed ? { keyed } : {}),
        ...script,
      });
      return { ...ran, arguments: target.args };
    }
    const result = keyed
      ? await callKeyed(gateway, sessionId, target.name, target.args, keyed(target.name), signal)
      : await gateway.callTool(sessionId, target.name, target.args, signal);
    const content = result.success
      ? JSON.stringify(result.result)
      : `Error: ${result.error ?? 'the tool failed without a message'}`;
    const outcome = { content, ok: result.success, arguments: target.args, ...tool };
    return result.activated ? withActivation(outcome, result.activated, exposure) : outcome;
  } catch (err) {
    // A stopped task abandons the call: the loop ends the task instead of telling the model.
    if (signal?.aborted) throw signal.reason;
    if (err instanceof AnswerLost) {
      // Not a failure: the model is told nothing until a human decided (tool-step.ts), or, for a tool safe
      // to call again, that calling it again is harmless.
      if (!keyed?.(target.name).safe)
        return { content: '', ok: false, arguments: target.args, ...tool, lost: true };
      return {
        content: `Error: ${target.name} was sent ${LOST_ANSWER_ATTEMPTS} times and ${err.message}; it is read-only or idempotent, so calling it again is harmless`,
        ok: false,
        arguments: target.args,
        ...tool,
      };
    }
    const approval = approvalOf(err);
    const consent = consentOf(err);
    const refused: ToolCallOutcome = {
      content: `Error: ${(err as Error).message}`,
      ok: false,
      arguments: target.args,
      ...tool,
      ...(approval ? { approval } : {}),
      ...(consent ? { consent } : {}),
    };
    // Refused after the gateway activated the tool's toolset for it: the activation stands, and is told.
    const activated = activatedOf(err);
    return activated ? withActivation(refused, activated, exposure) : refused;
  }
}

/**
 * A call that activated its tool's toolset on the way (activation without a turn): the model reads the result,
 * then what the activation did as an ACTIVATE would have told it (tools, tokens), with the new tools' definitions
 * (dispatch) or declarations (code) as an activation's result carries them; the task records the change.
 */
function withActivation(
  outcome: ToolCallOutcome,
  activated: ManageToolsetsResponse,
  exposure?: Exposure,
): ToolCallOutcome {
  const tokens = ToolDefinitionTokens.safeParse(activated.result.tool_definition_tokens);
  const told = { activated_for_this_call: activated.result.message };
  const usable = activated.tools ?? [];
  const note =
    exposure?.mode === 'code'
      ? withDeclarations(told, usable, exposure.shown)
      : exposure?.mode === 'dispatch'
        ? JSON.stringify(withDefinitions(told, usable, exposure.shown))
        : JSON.stringify(told);
  return {
    ...outcome,
    content: `${outcome.content}\n\n${note}`,
    ...(activated.change ? { change: activated.change, automatic: true } : {}),
    ...(tokens.success ? { toolTokens: tokens.data } : {}),
  };
}
