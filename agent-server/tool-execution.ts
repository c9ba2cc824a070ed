import type { ChatCompletionMessageFunctionToolCall } from 'openai/resources/chat/completions';
import { type JsonInputError, nestsDeeperThan, parseJson } from '../lib/json.ts';
import type { GatewayClient } from './gateway-client.ts';
import { MANAGE_TOOLSETS, type ManageToolsetsOutcome, runManageToolsets } from './manage-toolsets.ts';

/** One tool call's outcome: the tool message's text, whether it succeeded, and a toolset change if any. */
export interface ToolCallOutcome {
  content: string;
  ok: boolean;
  arguments: unknown;
  change?: ManageToolsetsOutcome['change'];
  /** For a change of toolsets: what it did to the tool-definition tokens, as the gateway counted them. */
  toolTokens?: ManageToolsetsOutcome['toolTokens'];
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

/**
 * Runs one tool call of the model's reply for `sessionId`: manage_toolsets goes to the gateway's admin API,
 * anything else to the gateway's call route. Every failure becomes an error message the model can read.
 */
export async function executeToolCall(
  call: ChatCompletionMessageFunctionToolCall,
  sessionId: string,
  gateway: GatewayClient,
  signal?: AbortSignal,
): Promise<ToolCallOutcome> {
  const parsed = parseArguments(call);
  if ('error' in parsed)
    return { content: `Error: ${parsed.error}`, ok: false, arguments: call.function.arguments };
  try {
    if (call.function.name === MANAGE_TOOLSETS) {
      const outcome = await runManageToolsets(parsed.args, sessionId, gateway, signal);
      return {
        content: outcome.content,
        ok: true,
        arguments: parsed.args,
        change: outcome.change,
        toolTokens: outcome.toolTokens,
      };
    }
    const result = await gateway.callTool(sessionId, call.function.name, parsed.args, signal);
    return result.success
      ? { content: JSON.stringify(result.result), ok: true, arguments: parsed.args }
      : {
          content: `Error: ${result.error ?? 'the tool failed without a message'}`,
          ok: false,
          arguments: parsed.args,
        };
  } catch (err) {
    // A stopped task abandons the call: the loop ends the task instead of telling the model.
    if (signal?.aborted) throw signal.reason;
    return { content: `Error: ${(err as Error).message}`, ok: false, arguments: parsed.args };
  }
}
