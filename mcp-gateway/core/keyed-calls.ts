import { ServiceError } from '../../lib/http/http-client.ts';
import { GENAI, inSpan, MCP, SpanKind, TOOLSHIFT } from '../../lib/telemetry/tracing.ts';
import { currentActor } from '../audit-context.ts';
import { ConsentNeeded } from '../backends/mcp-connection.ts';
import type { CatalogTool } from '../catalog/build.ts';
import type { CallFence, RefusalCode, ToolResult } from '../contract.ts';
import { Refusal } from '../refusals.ts';
import type { CallKeyQueries } from '../store/interface.ts';

// Exactly-once for keyed calls (docs/task-loop.md "A lost answer"): a call with an idempotency key runs at
// most once whichever replica it reaches, and a call sent under a task's lease that has passed on does not
// run. The outcome a key answered is recorded, so the caller whose answer was lost (a replica killed, a
// balancer's 502) gets that outcome when it asks again, instead of a second run.

/** What a call brings besides its tool and arguments: its key and the lease it was sent under. */
export interface CallIdentity {
  idempotency_key?: string;
  fence?: CallFence;
  /**
   * A tool of an inactive toolset activates it first (AUTO_ACTIVATE): for callers whose tool list follows the
   * session (the agent's loop, the MCP face's call_tool), not a legacy MCP client's fixed-at-listing one.
   */
  activate?: boolean;
}

/** An outcome as recorded: the tool's result, or the refusal the call ended with. */
type Recorded = { result: ToolResult } | { refusal: { code: RefusalCode; message: string } };

/** How long a caller told `in_progress` waits before asking again. */
const RETRY_AFTER_S = 1;

/**
 * Runs `run` (after `check`, the rules a run must pass) at most once per key. `refuse` records and makes a
 * refusal of the gateway's own (audited like the call's other refusals); `onUnrecorded` hears of an outcome
 * that could not be recorded.
 */
export async function keyedCall(
  keys: CallKeyQueries | undefined,
  call: CallIdentity & { session_id: string; tool: string },
  refuse: (code: RefusalCode, message: string, details?: Record<string, unknown>) => Refusal,
  check: () => Promise<void>,
  run: () => Promise<ToolResult>,
  onUnrecorded: (err: unknown) => void = () => {},
): Promise<ToolResult> {
  const key = call.idempotency_key ?? null;
  if (!keys || (key === null && !call.fence)) {
    await check();
    return run();
  }
  const begun = await keys.begin({
    key,
    session_id: call.session_id,
    tool: call.tool,
    task_id: call.fence?.task_id ?? null,
    fence: call.fence?.fence ?? null,
    at: Date.now(),
  });
  if ('fenced' in begun) {
    throw refuse(
      'fenced',
      `Task ${call.fence?.task_id} is held under fence ${begun.fenced} now; this call was sent under fence ` +
        `${call.fence?.fence} (a lease that has passed to another worker) and was not run`,
      { fence: begun.fenced },
    );
  }
  if ('existing' in begun) {
    const row = begun.existing;
    if (row.session_id !== call.session_id || row.tool !== call.tool) {
      throw refuse(
        'conflict',
        `The idempotency key ${key} was used for ${row.tool} in session ${row.session_id}; a key names one call`,
      );
    }
    if (row.state === 'started' || row.outcome === null) {
      throw refuse(
        'in_progress',
        `The call with idempotency key ${key} started at ${new Date(row.started_at).toISOString()} and has not ` +
          'ended; ask again with the same key for its outcome',
        { retry_after_s: RETRY_AFTER_S, started_at: new Date(row.started_at).toISOString() },
      );
    }
    const recorded = JSON.parse(row.outcome) as Recorded;
    if ('result' in recorded) return recorded.result;
    throw new Refusal(recorded.refusal.code, recorded.refusal.message);
  }
  if (key === null) {
    await check();
    return run();
  }
  try {
    await check();
  } catch (err) {
    // Refused before it ran: nothing happened, so the key is free for the call once allowed.
    await keys.forget(key);
    throw err;
  }
  // The call ran: its caller gets its outcome even if the record of it cannot be written (the store down a
  // moment). The key then stays started, so a repeat is told it is still running, never runs it again.
  const record = async (outcome: Recorded) => {
    try {
      await keys.finish(key, JSON.stringify(outcome), Date.now());
    } catch (err) {
      onUnrecorded(err);
    }
  };
  let result: ToolResult;
  try {
    result = await run();
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    // The backend's answer was lost: nothing to record. Asked again, the call goes to the backend again under
    // its key, where the tool-server's own record answers it (call-record.ts).
    if (err.details.outcome === 'unknown') await keys.forget(key).catch(onUnrecorded);
    else await record({ refusal: { code: err.code, message: err.message } });
    throw err;
  }
  await record({ result });
  return result;
}

/** Runs a checked call on its tool's backend (with the key, for a backend that keeps its own record), audited. */
export async function callBackend(
  tool: CatalogTool,
  call: { name: string; args: Record<string, unknown>; sessionId: string; key?: string },
  audit: (ok: boolean, detail?: string) => void,
  refuse: (code: RefusalCode, message: string, details?: Record<string, unknown>) => Refusal,
): Promise<ToolResult> {
  const { name, args, sessionId, key } = call;
  try {
    // A span of the call to its backend (tracing on): the tool-server or the upstream server joins it.
    const result = await inSpan(
      'mcp-gateway',
      `tools/call ${name}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [MCP.method]: 'tools/call',
          [GENAI.operation]: 'execute_tool',
          [GENAI.toolName]: name,
          [TOOLSHIFT.toolset]: tool.toolset,
          [TOOLSHIFT.session]: sessionId,
          'toolshift.backend': tool.backend.name,
        },
      },
      async (span) => {
        const { owner, for_user } = currentActor();
        const result = await tool.backend.callTool(name, args, {
          session: sessionId,
          key,
          owner,
          ...(for_user ? { forUser: for_user } : {}),
        });
        if (span && !result.success) span.setAttribute(GENAI.errorType, 'tool_error');
        return result;
      },
    );
    audit(result.success, result.error);
    return result;
  } catch (err) {
    // A backend refusing the arguments is a malformed call, reported the same way as the gateway's own check.
    if (err instanceof ServiceError && err.status === 400) throw refuse('invalid_arguments', err.message);
    if (err instanceof ConsentNeeded) throw refuse('consent_required', err.message, consentDetails(err));
    const message = `Backend ${tool.backend.name} failed for ${name}: ${(err as Error).message}`;
    // Its answer lost after the call was sent (a reset, a timeout): the outcome is unknown, not a failure.
    const refused = (err as { cause?: { code?: unknown } }).cause?.code === 'ECONNREFUSED';
    if (key && err instanceof ServiceError && (err.status === 502 || err.status === 504) && !refused)
      throw refuse('upstream_failed', message, { outcome: 'unknown' });
    throw refuse('upstream_failed', message);
  }
}

/** What a consent_required refusal carries: the toolset, and where the person connects their account. */
export const consentDetails = (err: ConsentNeeded) => ({
  toolset: err.toolset,
  ...(err.connectUrl ? { connect_url: err.connectUrl } : {}),
});
