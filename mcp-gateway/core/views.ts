import { Refusal } from '../refusals.ts';
import type { GatewayParts } from './parts.ts';

// A fixed view (/mcp/toolsets/<id>) is checked on every request: nothing of a toolset the operator disabled,
// or whose activation the policy denies now, is served, also to a client that opened the view before.

export function fixedViews(p: GatewayParts) {
  return {
    /**
     * A fixed view's read of its upstream's prompts or resources (`what`: the method), checked on every request
     * and audited: refused, with nothing started, unless the toolset is enabled and active in the view's
     * session now (an operator may disable it while a client holds the view).
     */
    async viewUpstream(sessionId: string, toolsetId: string, what: string) {
      const listed = (await p.listToolsets(sessionId)).toolsets.find((t) => t.id === toolsetId);
      const denied = p.ceiling.activationDenied(toolsetId);
      const ok = listed?.enabled === true && listed.active === true && denied === null;
      const why =
        listed?.enabled === false
          ? 'is disabled by the operator'
          : denied !== null
            ? `may not be activated under the operator's policy (${denied})`
            : 'is not active in this view';
      p.audit({
        session_id: sessionId,
        kind: 'read',
        subject: `${toolsetId} ${what}`,
        ok,
        ...(ok ? {} : { detail: why }),
      });
      const upstream = ok ? p.catalog.upstream(toolsetId) : undefined;
      if (!upstream) {
        const code = listed?.enabled === false ? 'disabled' : denied !== null ? 'denied' : 'inactive';
        throw new Refusal(code, `Toolset ${toolsetId} ${why}: nothing of it is served`);
      }
      return upstream;
    },
    /**
     * Before every request to a fixed view: refuses an unknown toolset (not_found), and one the operator disabled
     * or whose activation the policy denies as it stands now (disabled or denied, audited), so nothing of it is
     * served and its server is not started, also for a client that opened the view before the operator's
     * change. Answers the view's toolsets that are not active in its session (to activate before serving).
     */
    async checkView(sessionId: string, ids: readonly string[]): Promise<string[]> {
      const unknown = ids.filter((id) => !p.catalog.toolset(id));
      if (ids.length === 0 || unknown.length > 0) {
        throw new Refusal(
          'not_found',
          `Unknown toolset(s) in the view: ${unknown.join(', ') || '(none given)'}; valid: ${p.validIds()}`,
        );
      }
      const view = await p.store.load(sessionId);
      const disabled = ids.filter((id) => view.disabled.has(id));
      const denied = ids.flatMap((id) => p.ceiling.activationDenied(id) ?? []);
      if (disabled.length === 0 && denied.length === 0) {
        const on = new Set(view.toolsets ?? []);
        return ids.filter((id) => !on.has(id));
      }
      const message =
        disabled.length > 0
          ? `Toolset(s) ${disabled.join(', ')} disabled by the operator: this view serves nothing of them`
          : `${denied.join('; ')}: this view serves nothing of it`;
      p.audit({
        session_id: sessionId,
        kind: 'read',
        subject: ids.join(','),
        ok: false,
        detail: message,
      });
      throw new Refusal(disabled.length > 0 ? 'disabled' : 'denied', message);
    },
  };
}
