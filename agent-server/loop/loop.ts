import type {
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { TokenCounter } from '../../lib/tokens.ts';
import { type GatewayTool, manageToolsetsDefinition, type ToolsetInfo } from '../../mcp-gateway/contract.ts';
import type { GatewayClient } from '../clients/gateway.ts';
import type { Model, ModelReply, ModelRequest } from '../clients/model.ts';
import type { FinalStatus, TokenTotals, ToolExposure, Usage } from '../contract.ts';
import { ModelError, TaskStoppedError } from '../errors.ts';
import { createExposure, systemPromptFor } from './exposure.ts';
import { HumanEndedTask, unknownOutcomeQuestion } from './lost-answer.ts';
import { primedNote, primeToolsets } from './prime.ts';
import { type RecordedCall, recoverReply } from './recovery.ts';
import { buildModelRequest } from './request.ts';
import { withToolList } from './tool-list.ts';
import {
  type ApprovalDecision,
  type CallJournal,
  type Emit,
  type PendingCall,
  runToolCalls,
  throwIfStopped,
} from './tool-step.ts';

export type { Emit };

/** A paused loop, as stored while a task waits for an approval: everything needed to go on from there. */
export interface LoopSnapshot {
  messages: ChatCompletionMessageParam[];
  steps: number;
  usage: Usage;
  tokens: TokenTotals;
  used: string[];
  /** The task's exposure mode, and (dispatch) the tools whose definitions the conversation holds. */
  exposure?: ToolExposure;
  shown?: string[];
  /** The task's trace attempt this was saved in, so the attempt going on from it links to it (tasks/trace.ts). */
  trace?: { parent: string; attempt: number };
  /** The reply being answered: its tool calls, the one waiting, and the tool messages of those before it. */
  pending: {
    step: number;
    calls: ChatCompletionMessageFunctionToolCall[];
    index: number;
    done: ChatCompletionMessageParam[];
    tools: GatewayTool[];
  };
}

/** What the loop needs. */
export interface LoopDeps {
  model: Model;
  modelName: string;
  gateway: GatewayClient;
  emit: Emit;
  tokens: TokenCounter;
  /** Aborted (with a TaskStoppedError) when the task is cancelled or runs out of time. */
  signal?: AbortSignal;
  /** Pauses the task until a human decides on a call the policy asks about; `snapshot` is what to persist. */
  awaitApproval?: (pending: PendingCall, snapshot: LoopSnapshot) => Promise<ApprovalDecision>;
  /**
   * Where the task records its progress so another worker can go on from it: each reply with tool calls
   * before they run (`checkpoint`), and each call as it starts and ends.
   */
  journal?: CallJournal & { checkpoint(snapshot: LoopSnapshot): Promise<void> };
  /** This worker's name, in a `task_resumed` event. */
  worker?: string;
  /** The task and the fence this worker holds it under: each tool call carries them to the gateway. */
  calls?: { taskId: string; fence(): number | undefined };
  /** The task's trace (tasks/trace.ts), told each request and reply when tracing is on. */
  trace?: { request(request: ModelRequest): void; reply(reply: ModelReply): void };
}

/** How a task's loop ended. */
export interface LoopOutcome {
  status: FinalStatus;
  final_answer: string | null;
  error: string | null;
  steps: number;
  usage: Usage;
  toolsets_used: string[];
  tokens: TokenTotals;
}

const since = (start: number) => Math.round((performance.now() - start) * 100) / 100;

/** What the model is told when its reply was cut off: none of the reply's tool calls ran. */
export const CUT_OFF_NOTE =
  'Your previous reply was cut off at the output token limit (finish_reason: length), so none of its tool ' +
  'calls were run. Send them again, shorter: for example write a large file in several smaller edits.';

/**
 * The tool-definition tokens of a request carrying every enabled toolset, as far as they are known: an upstream
 * server not started yet has not listed its tools, so its toolset is named in `unknown` instead of guessed.
 */
export function allToolsetsTokens(
  toolsets: readonly ToolsetInfo[],
  meta: number,
): { known: number; unknown: string[] } {
  let known = meta;
  const unknown: string[] = [];
  for (const t of toolsets) {
    if (!t.enabled) continue;
    if (typeof t.definition_tokens === 'number') known += t.definition_tokens;
    else unknown.push(t.id);
  }
  return { known, unknown };
}

/** The tool-calling loop: model ⇄ tools until the model answers without tool calls or max_steps runs out. */
export async function runLoop(
  input: {
    sessionId: string;
    goal: string;
    maxSteps: number;
    /** How the model sees tools (TOOL_EXPOSURE or the request's `exposure`); native when absent. */
    exposure?: ToolExposure;
    /** Start with the toolset discovery is certain of for the goal (prime.ts). */
    prime?: boolean;
    /** Going on from a pause, with the human's decision on the call that waited. */
    resume?: { snapshot: LoopSnapshot; decision: ApprovalDecision };
    /**
     * Going on from another worker's claim: its last checkpoint (null: none, the task starts over) and the
     * calls it recorded since.
     */
    recovered?: {
      snapshot: LoopSnapshot | null;
      recorded: RecordedCall[];
      /** Starting over (no checkpoint): the toolsets primed for it the first time (prime.ts). */
      primed?: string[];
    };
  },
  deps: LoopDeps,
): Promise<LoopOutcome> {
  const { sessionId, maxSteps } = input;
  const { signal, emit } = deps;
  // The session's tool list is kept between steps and replaced when toolsets change (tool-list.ts).
  const gateway = withToolList(deps.gateway, sessionId);
  const saved = input.resume?.snapshot ?? input.recovered?.snapshot ?? undefined;
  const exposure = createExposure(saved?.exposure ?? input.exposure);
  for (const name of saved?.shown ?? []) exposure.shown.add(name);
  const usage: Usage = saved?.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  const tokens: TokenTotals = saved?.tokens ?? {
    tokenizer: deps.tokens.name,
    requests: 0,
    tool_definition_tokens: 0,
    all_toolsets_tool_tokens: 0,
    all_toolsets_not_counted: [],
    message_tokens: 0,
  };
  const used = new Set<string>(saved?.used);
  let steps = saved?.steps ?? 0;
  let cutOffs = 0;
  const end = (status: FinalStatus, final_answer: string | null, error: string | null): LoopOutcome => ({
    status,
    final_answer,
    error,
    steps,
    usage,
    toolsets_used: [...used],
    tokens,
  });

  try {
    // A task starting afresh: the toolset the goal certainly needs is active before the model is first asked.
    // Taken over before its first checkpoint, a task starts again: what was primed then is active still (no
    // call ran to change it), and the model is told of it as it was the first time.
    const primed = input.recovered?.primed
      ? input.recovered.primed
      : input.prime && !saved && !input.resume
        ? await primeToolsets(input.goal, sessionId, gateway.priming(), emit, signal)
        : [];
    for (const id of primed) used.add(id);
    const { toolsets } = await gateway.listToolsets(sessionId, undefined, signal);
    const meta = deps.tokens.tool(manageToolsetsDefinition);
    let allTools = allToolsetsTokens(toolsets, meta);
    const messages: ChatCompletionMessageParam[] = saved?.messages ?? [
      {
        role: 'system',
        content: systemPromptFor(exposure, toolsets, await gateway.tools(sessionId, signal)),
      },
      { role: 'user', content: input.goal + primedNote(primed) },
    ];
    /** The loop as it stands, answering call `index` of the reply `calls` of `step`. */
    const snapshotAt = (pending: LoopSnapshot['pending']): LoopSnapshot => ({
      messages,
      steps,
      usage,
      tokens,
      used: [...used],
      exposure: exposure.mode,
      shown: [...exposure.shown],
      pending,
    });
    /** Runs a reply's tool calls (or, resuming, the rest of them), pausing for approvals on the way. */
    const answer = async (
      calls: ChatCompletionMessageFunctionToolCall[],
      step: number,
      tools: GatewayTool[],
      resume?: { index: number; done: ChatCompletionMessageParam[]; decision?: ApprovalDecision },
    ) => {
      const awaitApproval = deps.awaitApproval;
      const toolMessages = await runToolCalls(calls, {
        sessionId,
        step,
        gateway,
        emit,
        signal,
        tools,
        used,
        exposure,
        resume,
        journal: deps.journal,
        calls: deps.calls,
        awaitApproval:
          awaitApproval &&
          ((pending) =>
            awaitApproval(
              pending,
              snapshotAt({ step, calls, index: pending.index, done: pending.done, tools }),
            )),
      });
      messages.push(...toolMessages);
    };
    if (input.resume && saved) {
      const p = saved.pending;
      const { decision } = input.resume;
      if (decision.fail) return end('failed', null, decision.fail);
      await answer(p.calls, p.step, p.tools, { index: p.index, done: p.done, decision });
    }
    if (input.recovered) {
      const p = saved?.pending;
      const worker = deps.worker ?? 'unknown';
      if (!p) emit('task_resumed', { worker, step: null, calls_done: 0, unknown: null, rerun: false });
      else {
        const r = recoverReply(p, input.recovered.recorded, exposure.mode === 'dispatch');
        for (const id of r.after?.used ?? []) used.add(id);
        for (const name of r.after?.shown ?? []) exposure.shown.add(name);
        emit('task_resumed', {
          worker,
          step: p.step,
          calls_done: r.index,
          unknown: r.unknown?.name ?? null,
          rerun: r.unknown?.safe ?? false,
        });
        let decision: ApprovalDecision | undefined;
        // Taken over mid-call: from now the gateway refuses what the previous holder sent and has not begun.
        if (r.unknown && deps.calls) {
          const fence = deps.calls.fence();
          if (fence !== undefined) await gateway.announceFence(deps.calls.taskId, fence, signal);
        }
        if (r.unknown && !r.unknown.safe) {
          const call = p.calls[r.index];
          const question = unknownOutcomeQuestion(call, r.unknown.name, 'worker_stopped');
          decision = deps.awaitApproval
            ? await deps.awaitApproval(
                { call, approval: question, index: r.index, done: r.done },
                snapshotAt({ ...p, index: r.index, done: r.done }),
              )
            : { approved: false, fail: `Task failed: ${question.reason}` };
          if (decision.fail) return end('failed', null, decision.fail);
        }
        await answer(p.calls, p.step, p.tools, { index: r.index, done: r.done, decision });
      }
    }
    while (steps < maxSteps) {
      throwIfStopped(signal);
      const tools = await gateway.tools(sessionId, signal);
      const request = buildModelRequest(deps.modelName, messages, tools, exposure.mode);
      const step = steps + 1;
      const toolTokens = deps.tokens.tools(
        request.tools.flatMap((t) => (t.type === 'function' ? [t.function] : [])),
      );
      const messageTokens = deps.tokens.messages(request.messages);
      // A server started since the last listing (the model activated it) has listed its tools by now.
      if (allTools.unknown.length > 0) {
        allTools = allToolsetsTokens(
          (await gateway.listToolsets(sessionId, undefined, signal)).toolsets,
          meta,
        );
      }
      emit('model_request', {
        step,
        tools: request.tools.map((t) => (t.type === 'function' ? t.function.name : t.type)),
        tool_tokens: toolTokens,
        message_tokens: messageTokens,
        messages: request.messages.length,
        all_toolsets_tool_tokens: allTools.known,
        all_toolsets_not_counted: allTools.unknown,
        tokenizer: deps.tokens.name,
        exposure: exposure.mode,
      });
      deps.trace?.request(request);
      const started = performance.now();
      const reply = await deps.model.complete(request, {
        signal,
        onRetry: (retry) => emit('model_retry', { step, ...retry }),
      });
      deps.trace?.reply(reply);
      steps = step;
      // Counted once the model answered: a request that failed cost nothing and saved nothing.
      tokens.requests++;
      tokens.tool_definition_tokens += toolTokens;
      tokens.message_tokens += messageTokens;
      tokens.all_toolsets_tool_tokens += allTools.known;
      const notCounted = new Set([...(tokens.all_toolsets_not_counted ?? []), ...allTools.unknown]);
      tokens.all_toolsets_not_counted = [...notCounted];
      usage.prompt_tokens += reply.usage.prompt_tokens;
      usage.completion_tokens += reply.usage.completion_tokens;
      usage.total_tokens += reply.usage.total_tokens;
      const latency = since(started);
      emit(
        'model_call',
        {
          step,
          tools: request.tools.map((t) => (t.type === 'function' ? t.function.name : t.type)),
          content: reply.content,
          tool_calls: reply.tool_calls.map((c) => ({ id: c.id, name: c.function.name })),
          usage: reply.usage,
          finish_reason: reply.finish_reason ?? null,
          latency_ms: latency,
          attempts: reply.attempts ?? 1,
          tool_tokens: toolTokens,
          message_tokens: messageTokens,
        },
        latency,
      );
      throwIfStopped(signal);
      if (reply.finish_reason === 'length') {
        // A cut-off reply's tool calls may be truncated mid-argument: never run them.
        if (reply.tool_calls.length > 0 || reply.content === null) {
          if (++cutOffs >= 2) {
            return end(
              'failed',
              null,
              'The model’s replies were cut off at its output token limit twice in a row (finish_reason: length); ' +
                'their tool calls were not run. Raise the model’s output limit or split the task.',
            );
          }
          messages.push({ role: 'user', content: CUT_OFF_NOTE });
          continue;
        }
      }
      cutOffs = 0;
      if (reply.tool_calls.length === 0) return end('completed', reply.content ?? '', null);

      messages.push({ role: 'assistant', content: reply.content, tool_calls: reply.tool_calls });
      // On record before any of its calls runs: a worker taking the task over goes on from this reply.
      await deps.journal?.checkpoint(
        snapshotAt({ step, calls: reply.tool_calls, index: 0, done: [], tools }),
      );
      await answer(reply.tool_calls, step, tools);
    }
    return end('max_steps', null, `The task reached max_steps (${maxSteps}) without a final answer`);
  } catch (err) {
    const stop =
      err instanceof TaskStoppedError
        ? err
        : signal?.aborted && signal.reason instanceof TaskStoppedError
          ? signal.reason
          : undefined;
    if (stop) return end(stop.reason, null, stop.message);
    const message =
      err instanceof ModelError || err instanceof HumanEndedTask
        ? err.message
        : `Task failed: ${(err as Error).message}`;
    return end('failed', null, message);
  }
}
