import { trace } from '../../lib/telemetry/tracing.ts';
import type { RefusalCode, ToolResult } from '../contract.ts';
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
): Promise<ToolResult> {
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
    const names = toolNames(c, on);
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
  if (!on.includes(tool.toolset)) {
    throw refuse(
      'inactive',
      `Tool ${name} belongs to toolset ${tool.toolset}, which is not active in this session; activate ${tool.toolset} first`,
    );
  }
  if (!tool.validate(args)) {
    const problems = describeValidationErrors(tool.validate.errors);
    const expected = describeParameters(tool.definition.parameters);
    throw refuse('invalid_arguments', `Invalid arguments for ${name}: ${problems}. Expected: ${expected}`);
  }
  const identity = { ...call, session_id: sessionId, tool: name };
  const check = () =>
    c.ceiling.checkCall(
      sessionId,
      { name, toolset: tool.toolset, annotations: tool.definition.annotations },
      args,
    );
  // The backend hears the key too (the tool-server keeps its own record, an upstream gets it in _meta).
  const key = call.idempotency_key;
  return keyedCall(
    c.callKeys,
    identity,
    refuse,
    check,
    () => callBackend(tool, { name, args, sessionId, key }, auditCall, refuse),
    (err) => c.log.error({ err, key }, 'the outcome of a keyed call could not be recorded'),
  );
}
