import { trace } from '../../lib/telemetry/tracing.ts';
import { currentActor, withActor } from '../audit-context.ts';
import type { CallToolResponse, ManageToolsetsResponse, RefusalCode } from '../contract.ts';
import { Refusal } from '../refusals.ts';
import { describeParameters, describeValidationErrors } from './describe-schema.ts';
import { type CallIdentity, callBackend, keyedCall } from './keyed-calls.ts';
import type { GatewayCore } from './parts.ts';
import { active, toolNames } from './session-toolsets.ts';

/**
 * Calls a tool for a session: only one of its active toolsets', never one withheld or disabled, with valid
 * arguments, past the operator's ceiling; a keyed call runs at most once (keyed-calls.ts). Audited either way.
 */
export async function callTool(
  c: GatewayCore,
  sessionId: string,
  name: string,
  args: Record<string, unknown>,
  call: CallIdentity = {},
): Promise<CallToolResponse> {
  const auditCall = (ok: boolean, detail?: string) =>
    c.audit({ session_id: sessionId, kind: 'call', subject: name, ok, detail });
  const refuse = (code: RefusalCode, message: string, details?: Record<string, unknown>) => {
    auditCall(false, message);
    trace.getActiveSpan()?.setAttribute('toolshift.refusal', code);
    return new Refusal(code, message, details);
  };
  const [, view] = await Promise.all([c.catalog.refreshFor(name), c.store.load(sessionId)]);
  const tool = c.catalog.tools.get(name);
  const on = active(c, view);
  const withheld = c.catalog.withheld(name);
  if (withheld) throw refuse('withheld', withheld);
  if (!tool) {
    const names = toolNames(c, on, view.only);
    const listed = names.length > 0 ? names.join(', ') : 'none (activate a toolset first)';
    throw refuse('unknown_tool', `Unknown tool ${name}. Tools active in this session: ${listed}`);
  }
  if (view.disabled.has(tool.toolset)) {
    throw refuse(
      'disabled',
      `Tool ${name} belongs to toolset ${tool.toolset}, which the operator has disabled`,
    );
  }
  const team = (await c.teamDisabled()).get(tool.toolset);
  if (team) {
    throw refuse(
      'disabled',
      `Tool ${name} belongs to toolset ${tool.toolset}, which team ${team} may not use`,
    );
  }
  if (!tool.validate(args)) {
    const problems = describeValidationErrors(tool.validate.errors);
    const expected = describeParameters(tool.definition.parameters);
    throw refuse('invalid_arguments', `Invalid arguments for ${name}: ${problems}. Expected: ${expected}`);
  }
  let activated: ManageToolsetsResponse | undefined;
  const some = view.only.get(tool.toolset);
  const isActive = on.includes(tool.toolset);
  if (!isActive || (some && !some.includes(name))) {
    // Of a toolset active with some of its tools, the gateway activates this one tool.
    const tools = isActive ? [name] : undefined;
    // A call that will be refused as fenced activates nothing for the worker that lost the task.
    if (call.activate && call.fence && c.callKeys) {
      const highest = await c.callKeys.announce(call.fence.task_id, call.fence.fence, Date.now());
      if (highest > call.fence.fence) {
        throw refuse(
          'fenced',
          `Task ${call.fence.task_id} is held under fence ${highest} now; ${name} was not run`,
          {
            fence: highest,
          },
        );
      }
    }
    const auto = call.activate ? await activateFor(c, sessionId, name, tool.toolset, tools) : { why: '' };
    if ('why' in auto) {
      const state = isActive
        ? `of which only ${some?.join(', ')} are active in this session; activate ${tool.toolset} or its tool ${name} first`
        : `which is not active in this session; activate ${tool.toolset} first`;
      throw refuse('inactive', `Tool ${name} belongs to toolset ${tool.toolset}, ${state}${auto.why}`);
    }
    activated = auto.activated;
  }
  const { activate: _, ...keyedBy } = call;
  const identity = { ...keyedBy, session_id: sessionId, tool: name };
  const check = () =>
    c.ceiling.checkCall(
      sessionId,
      { name, toolset: tool.toolset, annotations: tool.definition.annotations },
      args,
    );
  // The backend hears the key too (the tool-server keeps its own record, an upstream gets it in _meta).
  const key = call.idempotency_key;
  try {
    const result = await keyedCall(
      c.callKeys,
      identity,
      refuse,
      check,
      () => callBackend(tool, { name, args, sessionId, key }, auditCall, refuse),
      (err) => c.log.error({ err, key }, 'the outcome of a keyed call could not be recorded'),
    );
    return activated ? { ...result, activated } : result;
  } catch (err) {
    // Refused after its toolset was activated for it (a limit, the policy): the activation stands, and is told.
    if (activated && err instanceof Refusal)
      throw new Refusal(err.code, err.message, { ...err.details, activated });
    throw err;
  }
}

/**
 * Activation without a turn: a tool of an inactive toolset is called, so its toolset is activated for the call
 * (when AUTO_ACTIVATE allows it) as the model's own ACTIVATE would be — the ceiling, the token budget and the
 * policy judge it, and anything a human would have to approve is left to the model's explicit ACTIVATE. Returns
 * the activation, or why there was none (words appended to the `inactive` refusal).
 */
async function activateFor(
  c: GatewayCore,
  sessionId: string,
  name: string,
  toolset: string,
  tools?: string[],
): Promise<{ activated: ManageToolsetsResponse } | { why: string }> {
  const activate = c.activate;
  if (!activate) return { why: '' };
  try {
    const actor = { ...currentActor(), automatic: name, unasked: true };
    return { activated: await withActor(actor, () => activate(sessionId, toolset, tools)) };
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    return { why: ` (it was not activated for this call: ${err.message})` };
  }
}
