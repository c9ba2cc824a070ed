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
  let activated: ManageToolsetsResponse | undefined;
  const some = view.only.get(tool.toolset);
  const isActive = on.includes(tool.toolset);
  if (!isActive || (some && !some.includes(name))) {
    // Of a toolset active with some of its tools, the gateway activates this one tool.
    const tools = isActive ? [name] : undefined;
    const auto = call.activate ? await activateFor(c, sessionId, name, tool.toolset, tools) : { why: '' };
    if ('why' in auto) {
      const state = isActive
        ? `of which only ${some?.join(', ')} are active in this session; activate ${tool.toolset} or its tool ${name} first`
        : `which is not active in this session; activate ${tool.toolset} first`;
      throw refuse('inactive', `Tool ${name} belongs to toolset ${tool.toolset}, ${state}${auto.why}`);
    }
    activated = auto.activated;
  }
  if (!tool.validate(args)) {
    const problems = describeValidationErrors(tool.validate.errors);
    const expected = describeParameters(tool.definition.parameters);
    throw refuse('invalid_arguments', `Invalid arguments for ${name}: ${problems}. Expected: ${expected}`);
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
  const result = await keyedCall(
    c.callKeys,
    identity,
    refuse,
    check,
    () => callBackend(tool, { name, args, sessionId, key }, auditCall, refuse),
    (err) => c.log.error({ err, key }, 'the outcome of a keyed call could not be recorded'),
  );
  return activated ? { ...result, activated } : result;
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
    const actor = { ...currentActor(), automatic: name };
    return { activated: await withActor(actor, () => activate(sessionId, toolset, tools)) };
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    return { why: ` (it was not activated for this call: ${err.message})` };
  }
}
