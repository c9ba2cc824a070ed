import type { ChangeDefaultsRequest, ChangeDefaultsResponse } from '../contract.ts';
import { Refusal } from '../refusals.ts';
import { lower } from './change-toolsets.ts';
import type { GatewayCore } from './parts.ts';
import { defaults, prepare, requireKnown } from './session-toolsets.ts';

/**
 * Changes which toolsets new sessions start with (a user's "always give my tasks these"); sessions that
 * never changed their toolsets follow it too, the others keep theirs.
 */
export async function changeDefaults(
  c: GatewayCore,
  req: ChangeDefaultsRequest,
): Promise<ChangeDefaultsResponse> {
  const ids = [...new Set(req.toolset_ids)];
  requireKnown(c, null, 'default', ids);
  const activate = req.action === 'ACTIVATE';
  const view = await c.store.load(null);
  const disabled = ids.filter((id) => view.disabled.has(id));
  if (activate && disabled.length > 0) {
    c.audit({
      session_id: null,
      kind: 'default',
      subject: ids.join(','),
      ok: false,
      detail: 'disabled',
    });
    throw new Refusal(
      'disabled',
      `Toolset(s) disabled by the operator: ${disabled.join(', ')}; enable them first (action ENABLE)`,
    );
  }
  // A new default is started and listed now, so every session that has it is offered its tools; one whose
  // server cannot start is refused, as an activation would be.
  if (activate) await prepare(c, null, ids);
  const before = defaults(c, view);
  await c.store.setDefaults(ids, activate);
  const overrides = new Map(view.overrides);
  for (const id of ids) overrides.set(id, activate);
  const after = defaults(c, { overrides });
  c.audit({
    session_id: null,
    kind: 'default',
    subject: ids.join(','),
    ok: true,
    detail: lower(req.action),
  });
  c.log.info({ action: req.action, ids, defaults: after }, 'default toolsets changed');
  return {
    default_toolsets: after,
    unchanged: ids.filter((id) => before.includes(id) === after.includes(id)),
  };
}
