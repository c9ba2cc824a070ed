import { currentActor } from '../audit-context.ts';
import { type ChangeToolsetsRequest, type ChangeToolsetsResponse, DEFAULT_SESSION } from '../contract.ts';
import { Refusal } from '../refusals.ts';
import type { SessionView } from '../store/interface.ts';
import type { GatewayCore } from './parts.ts';
import { active, prepare, requireKnown, toolNames, unlisted } from './session-toolsets.ts';

// A change of a session's toolsets (ACTIVATE, DEACTIVATE) or of the operator's ceiling (ENABLE, DISABLE):
// load, decide, persist in one short transaction, audit.

/** What a change did: the ids it changed, and the session's active toolsets after it. */
interface Done {
  changed: string[];
  after: string[];
  /** Of `after`, those active with only some of their tools. */
  only: SessionView['only'];
}

export function lower(action: ChangeToolsetsRequest['action']) {
  return action.toLowerCase() as 'activate' | 'deactivate' | 'enable' | 'disable';
}

export async function changeToolsets(
  c: GatewayCore,
  req: ChangeToolsetsRequest,
): Promise<ChangeToolsetsResponse> {
  const sessionId = req.session_id ?? DEFAULT_SESSION;
  const ids = [...new Set(req.toolset_ids)];
  requireKnown(c, sessionId, lower(req.action), ids);
  const view = await c.store.load(sessionId);
  const before = active(c, view);
  // Taken now: activating a toolset whose server had not listed its tools lists them (they are new).
  const beforeTools = toolNames(c, before, view.only);
  let done: Done;
  if (req.action === 'ACTIVATE') done = await activate(c, sessionId, ids, view, before, req.tools);
  else if (req.action === 'DEACTIVATE') {
    const stored = await c.store.deactivate(sessionId, ids, before);
    const forUser = currentActor().for_user;
    if (forUser) await c.catalog.release(stored.changed, forUser);
    done = {
      changed: stored.changed,
      after: active(c, { ...view, toolsets: stored.toolsets }),
      only: stored.only,
    };
  } else done = await setEnabled(c, ids, view, req.action === 'ENABLE');
  const { changed, after, only } = done;
  const automatic = currentActor().automatic;
  c.audit({
    session_id: sessionId,
    kind: lower(req.action),
    subject: ids.join(','),
    ok: true,
    ...(automatic ? { detail: `automatic: the model called ${automatic}` } : {}),
  });
  const afterTools = toolNames(c, after, only);
  c.log.info({ session: sessionId, action: req.action, ids, active: after }, 'toolsets changed');
  return {
    session_id: sessionId,
    active_toolsets: after,
    tools: afterTools,
    added_tools: afterTools.filter((t) => !beforeTools.includes(t)),
    removed_tools: beforeTools.filter((t) => !afterTools.includes(t)),
    unchanged: ids.filter((id) => !changed.includes(id)),
  };
}

/** Activates in the session: never a disabled toolset, the ceiling asked, the upstream servers started first. */
async function activate(
  c: GatewayCore,
  sessionId: string,
  ids: string[],
  view: SessionView,
  before: string[],
  tools?: readonly string[],
): Promise<Done> {
  const why = await disabledFor(c, ids, view);
  if (why) {
    c.audit({
      session_id: sessionId,
      kind: 'activate',
      subject: ids.join(','),
      ok: false,
      detail: 'disabled',
    });
    throw new Refusal('disabled', `${why}; they cannot be activated`);
  }
  const fresh = ids.filter((id) => !before.includes(id));
  if (fresh.length > 0) await c.ceiling.checkActivation(sessionId, fresh);
  // Also one already active (a default) whose server has not listed its tools: activating it lists them.
  await prepare(
    c,
    sessionId,
    ids.filter((id) => !before.includes(id) || unlisted(c, id, true)),
  );
  // A session never stored starts from what it had: the defaults.
  const only = tools ? splitTools(c, sessionId, ids, tools) : undefined;
  const stored = await c.store.activate(sessionId, ids, before, only);
  return {
    changed: stored.changed,
    after: active(c, { ...view, toolsets: stored.toolsets }),
    only: stored.only,
  };
}

/** Why some of `ids` cannot be activated: disabled by the operator, or by a team of the request's user. */
async function disabledFor(c: GatewayCore, ids: string[], view: SessionView): Promise<string | undefined> {
  const disabled = ids.filter((id) => view.disabled.has(id));
  if (disabled.length > 0) return `Toolset(s) disabled by the operator: ${disabled.join(', ')}`;
  const byTeam = await c.teamDisabled();
  const refused = ids.filter((id) => byTeam.has(id));
  if (refused.length === 0) return undefined;
  return `Toolset(s) your team may not use: ${refused.map((id) => `${id} (team ${byTeam.get(id)})`).join(', ')}`;
}

/** The operator's ENABLE or DISABLE, for every session; the session's toolsets after it. */
async function setEnabled(c: GatewayCore, ids: string[], view: SessionView, enable: boolean): Promise<Done> {
  const changed = ids.filter((id) => view.disabled.has(id) === enable);
  if (changed.length > 0) await c.store.setEnabled(changed, enable);
  const disabled = new Set(view.disabled);
  for (const id of changed) {
    if (enable) disabled.delete(id);
    else disabled.add(id);
  }
  // Disabling removes the toolset from every session, this one included.
  const toolsets =
    view.toolsets && (enable ? view.toolsets : view.toolsets.filter((id) => !changed.includes(id)));
  return { changed, after: active(c, { ...view, toolsets, disabled }), only: view.only };
}

/**
 * ACTIVATE's `tools` by toolset, each named tool with the toolset among `ids` that has it (their servers listed
 * by now): a name none of them has, or a toolset given none of its tools, is refused with what is valid.
 */
function splitTools(
  c: GatewayCore,
  sessionId: string,
  ids: readonly string[],
  tools: readonly string[],
): Map<string, string[]> {
  const only = new Map<string, string[]>();
  for (const id of ids)
    only.set(
      id,
      (c.catalog.toolset(id)?.tools ?? []).filter((n) => tools.includes(n)),
    );
  const strays = tools.filter((n) => !ids.some((id) => only.get(id)?.includes(n)));
  const empty = ids.filter((id) => only.get(id)?.length === 0);
  if (strays.length === 0 && empty.length === 0) return only;
  const of = ids
    .map((id) => `${id}: ${(c.catalog.toolset(id)?.tools ?? []).join(', ') || 'none listed'}`)
    .join('; ');
  const message =
    (strays.length > 0 ? `tools ${strays.join(', ')} are not tools of ${ids.join(', ')}. ` : '') +
    (empty.length > 0 ? `No tool named for ${empty.join(', ')}: activate it in a call of its own. ` : '') +
    `Their tools: ${of}`;
  c.audit({
    session_id: sessionId,
    kind: 'activate',
    subject: ids.join(','),
    ok: false,
    detail: message.slice(0, 500),
  });
  throw new Refusal('invalid_arguments', `Invalid arguments for ACTIVATE: ${message}`);
}
