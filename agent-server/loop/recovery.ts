import type {
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { GatewayTool } from '../../mcp-gateway/contract.ts';
import { calledName } from './dispatch.ts';
import { safeToRepeat } from './lost-answer.ts';
import type { CallResult } from './tool-step.ts';

export { safeToRepeat, unknownOutcomeReason } from './lost-answer.ts';

// A task taken over from a worker that stopped: where its checkpointed reply goes on. The calls recorded as
// ended are answered as recorded; the first one not ended either never started (it runs now) or started and
// never ended: it may have had its effect, so it runs again only when its tool says that is harmless
// (read-only or idempotent), and otherwise a human decides.

/** A call of the checkpointed reply as its worker recorded it. */
export interface RecordedCall {
  index: number;
  call_id: string;
  finished: boolean;
  result: unknown;
}

/** The checkpointed reply's state: the calls answered, and the first call still to answer. */
export interface RecoveredReply {
  /** The first call not answered (the reply's length when all were). */
  index: number;
  /** The tool messages of the calls before it. */
  done: ChatCompletionMessageParam[];
  /** The loop state after the last answered call (toolsets used, definitions shown), when one was recorded. */
  after?: { used: string[]; shown: string[] };
  /** The call at `index` started and never ended: its tool's name, and whether running it again is harmless. */
  unknown?: { name: string; safe: boolean };
}

/** Where the reply `calls` (checkpointed after `done`, at `index`) goes on, given what was recorded since. */
export function recoverReply(
  pending: {
    calls: ChatCompletionMessageFunctionToolCall[];
    index: number;
    done: ChatCompletionMessageParam[];
    tools: GatewayTool[];
  },
  recorded: readonly RecordedCall[],
  dispatch: boolean,
): RecoveredReply {
  // Only records of this reply's calls count (a record is matched by its call's id as well as its place).
  const at = new Map(
    recorded.filter((r) => r.call_id === pending.calls[r.index]?.id).map((r) => [r.index, r]),
  );
  const done = [...pending.done];
  let index = pending.index;
  let after: RecoveredReply['after'];
  for (; index < pending.calls.length; index++) {
    const record = at.get(index);
    const result = record?.result as CallResult | null | undefined;
    // Not ended, or ended without running (refused for an approval): the call is answered from here on.
    if (!record?.finished || !result?.message) break;
    done.push(result.message);
    after = { used: result.used, shown: result.shown };
  }
  const open = at.get(index);
  if (index >= pending.calls.length || !open || open.finished) return { index, done, after };
  const call = pending.calls[index];
  const name = dispatch ? calledName(call) : call.function.name;
  return { index, done, after, unknown: { name, safe: safeToRepeat(name, pending.tools) } };
}
