import nodeModule from 'node:module';
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import type { GatewayTool } from '../../mcp-gateway/contract.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import { DEFAULT_SCRIPT_LIMITS, type ScriptLimits } from '../sandbox/limits.ts';
import { runScript, type ScriptRun, type ToolAnswer } from '../sandbox/sandbox.ts';
import { aliasesOf, declarationsFor } from './declarations.ts';
import { AnswerLost, callKeyed, type KeyedCall } from './lost-answer.ts';

// TOOL_EXPOSURE=code: the model's tools array stays `[manage_toolsets, run_code]`, an activation's
// result declares the new tools in TypeScript (once each, after the cached prefix, as dispatch does with JSON),
// and a run_code script calls them in a sandbox (sandbox/). Each of its calls goes through the gateway as a
// direct call does — session, ceiling, policy, limits, audit — marked as the script's; only what the script
// prints and returns comes back to the model, so the records it went through never enter the context.

export const RUN_CODE = 'run_code';

/** The longest script the model may send. */
const MAX_CODE_CHARS = 64 * 1024;

/**
 * run_code as the model sees it: short, for it is in every request (a script's bounds are told when one is
 * passed, not up front).
 */
export const runCodeTool: ChatCompletionTool = {
  type: 'function',
  function: {
    name: RUN_CODE,
    description:
      '{code}: an async JavaScript function body calling the active tools (`await read_text_file({ path: "a.md" })` ' +
      'returns its result or throws); only what it prints and returns comes back. {tool, arguments}: one call, ' +
      'for a tool that needs a human’s approval.',
    parameters: {
      type: 'object',
      properties: { code: { type: 'string' }, tool: { type: 'string' }, arguments: { type: 'object' } },
    },
  },
};

/** What a code task is told beside the catalog: where its tools are. */
export const CODE_NOTE = 'Activated tools are declared in TypeScript and called from run_code scripts.';

/** The code-task part of the system prompt: the tools usable when it starts, declared. */
export function startingDeclarations(usable: readonly GatewayTool[], shown: Set<string>): string {
  const text = declarationsFor(usable, shown);
  return text === '' ? '' : `\n\nTools usable now in run_code (toolsets already active):\n${text}`;
}

/**
 * A code task's manage_toolsets result: the gateway's JSON, then the declarations of the tools it made usable
 * as TypeScript text (not a JSON string: no escaped quotes and newlines to pay for).
 */
export function withDeclarations(
  result: Record<string, unknown>,
  usable: readonly GatewayTool[],
  shown: Set<string>,
): string {
  const earlier = usable.filter((t) => shown.has(t.name)).map((t) => t.name);
  const declarations = declarationsFor(usable, shown);
  const json = JSON.stringify({ ...result, ...(earlier.length > 0 ? { also_usable: earlier } : {}) });
  return declarations === '' ? json : `${json}\n\n${declarations}`;
}

/** One call a script made, for the events of the task. */
export interface ScriptCallSeen {
  index: number;
  name: string;
  toolset: string | null;
  args: Record<string, unknown>;
  ok: boolean;
  content: string;
  ms: number;
}

/** What a run needs of the loop: the session's gateway, the call's key, and who hears each inner call. */
export interface CodeRunContext {
  sessionId: string;
  /** The gateway client whose requests are marked as a script's. */
  gateway: GatewayClient;
  signal?: AbortSignal;
  /** The run_code call's key and lease: each inner call's key is it and the call's number. */
  keyed?: (name: string) => KeyedCall;
  /** Before each inner call (the owner's limits may make it wait). */
  started?: (index: number, name: string) => Promise<void> | void;
  ended?: (seen: ScriptCallSeen) => void;
  limits?: ScriptLimits;
}

/** What the loop gives a run beside the gateway: who hears its calls, and its bounds. */
export type ScriptHooks = Pick<CodeRunContext, 'started' | 'ended' | 'limits'>;

/** The outcome of a run_code call: the tool message, and whether the script ended without an error. */
export async function runCode(
  args: Record<string, unknown>,
  ctx: CodeRunContext,
): Promise<{ content: string; ok: boolean }> {
  const { code, ...rest } = args;
  if (Object.keys(rest).length > 0)
    return {
      ok: false,
      content: `Error: run_code takes {code} (a script) or {tool, arguments} (one call); remove ${Object.keys(rest).join(', ')}`,
    };
  if (typeof code !== 'string' || code.trim() === '')
    return { ok: false, content: 'Error: run_code needs `code`: the script to run, as a string' };
  if (code.length > MAX_CODE_CHARS)
    return {
      ok: false,
      content: `Error: the script is ${code.length} characters; at most ${MAX_CODE_CHARS} run`,
    };
  const usable = await ctx.gateway.tools(ctx.sessionId, ctx.signal);
  const aliases = aliasesOf(usable);
  const toolsetOf = new Map(usable.map((t) => [t.name, t.toolset]));
  const limits = ctx.limits ?? DEFAULT_SCRIPT_LIMITS;
  const names: string[] = [];
  const run = await runScript(
    {
      code: stripTypes(code),
      tools: usable.map((t) => ({ name: t.name, alias: aliases.get(t.name) })),
      limits,
    },
    async (name, toolArgs, index, runSignal) => {
      names.push(name);
      await ctx.started?.(index, name);
      const began = performance.now();
      // The call ends with the task, and with the run when the script is ended before it (a bound passed).
      const signal = ctx.signal ? AbortSignal.any([ctx.signal, runSignal]) : runSignal;
      const answer = await innerCall({ ...ctx, signal }, name, toolArgs, index);
      const content = answer.ok ? (JSON.stringify(answer.value) ?? '') : `Error: ${answer.error}`;
      ctx.ended?.({
        index,
        name,
        toolset: toolsetOf.get(name) ?? null,
        args: toolArgs,
        ok: answer.ok,
        content,
        ms: performance.now() - began,
      });
      return answer;
    },
    ctx.signal,
  );
  return { ok: run.error === undefined, content: reportOf(run, names) };
}

/** One call of a script, through the gateway as a direct call goes; its failure is the script's error. */
async function innerCall(
  ctx: CodeRunContext,
  name: string,
  args: Record<string, unknown>,
  index: number,
): Promise<ToolAnswer> {
  try {
    const keyed = ctx.keyed?.(name);
    const result = keyed
      ? await callKeyed(
          ctx.gateway,
          ctx.sessionId,
          name,
          args,
          { ...keyed, idempotency_key: `${keyed.idempotency_key}:s${index}` },
          ctx.signal,
        )
      : await ctx.gateway.callTool(ctx.sessionId, name, args, ctx.signal);
    return result.success
      ? { ok: true, value: result.result }
      : { ok: false, error: result.error ?? `${name} failed without a message` };
  } catch (err) {
    if (ctx.signal?.aborted)
      return { ok: false, error: `${name} was cut short: ${(ctx.signal.reason as Error)?.message}` };
    if (err instanceof AnswerLost) return { ok: false, error: `${name}: ${err.message}; it may have run` };
    return { ok: false, error: (err as Error).message };
  }
}

/** Node's type stripper (22.13 and later; the types this project builds with predate it). */
const strip = (nodeModule as unknown as { stripTypeScriptTypes?: (code: string) => string })
  .stripTypeScriptTypes;

/** TypeScript's annotations blanked out (a model writes them from the declarations), lines kept; else as sent. */
function stripTypes(code: string): string {
  // Node's stripper is marked experimental and says so on stderr at its first use: not the user's business.
  const warn = process.emitWarning;
  process.emitWarning = () => undefined;
  try {
    return strip ? strip(code) : code;
  } catch {
    // Not TypeScript either: QuickJS says what is wrong with it as JavaScript.
    return code;
  } finally {
    process.emitWarning = warn;
  }
}

/** The tool message of a run: printed text, the value, the error with its line, a summary of the calls. */
function reportOf(run: ScriptRun, names: readonly string[]): string {
  const parts: string[] = [];
  if (run.output !== '') parts.push(run.output.replace(/\n$/, ''));
  // The sandbox cut the value to what the output's bound left of it.
  if (run.returned !== undefined) parts.push(`returned: ${run.returned}`);
  if (run.error)
    parts.push(`Error: ${run.error.message}${run.error.line ? ` (script line ${run.error.line})` : ''}`);
  const counts = new Map<string, number>();
  for (const n of names) counts.set(n, (counts.get(n) ?? 0) + 1);
  const calls = [...counts].map(([n, k]) => (k === 1 ? n : `${n} ×${k}`)).join(', ');
  const abandoned = run.abandoned ? `; ${run.abandoned} more it did not wait for were not made` : '';
  parts.push(
    `[run_code: ${run.calls} call${run.calls === 1 ? '' : 's'}${calls ? `: ${calls}` : ''}${abandoned}]`,
  );
  return parts.join('\n');
}
