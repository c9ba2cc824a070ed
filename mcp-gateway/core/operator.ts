import { CatalogError } from '../catalog/catalog.ts';
import { Refusal } from '../refusals.ts';
import type { GatewayParts } from './parts.ts';

// What only the operator does at the gateway: decide approvals, release withheld upstream tools, reload the
// toolsets. Each is audited.

/** The answer to an approval that does not exist (or, to a user, is not theirs to see: admin/scope.ts). */
export const unknownApproval = (id: string) =>
  new Refusal('not_found', `No approval ${id}; GET /mcp/admin/approvals lists them`);

export function operatorActions(p: GatewayParts) {
  return {
    /** Approves or denies a pending approval, audited with who decided. */
    async decideApproval(id: string, approve: boolean, by: string, reason?: string) {
      const decided = await p.ceiling.approvals.decide(id, approve, by, reason);
      if (!decided) throw unknownApproval(id);
      if (!decided.changed) {
        throw new Refusal(
          'conflict',
          `Approval ${id} is already ${decided.approval.status}; only a pending one can be decided`,
        );
      }
      const a = decided.approval;
      // Recorded under the task and user the approval belongs to, so their audit shows the decision.
      p.store.audit(
        {
          session_id: a.session_id,
          kind: 'approval',
          subject: a.subject,
          ok: approve,
          detail: `${a.id} ${approve ? 'approved' : 'denied'} by ${by}${reason ? `: ${reason}` : ''}`,
        },
        { actor: by, task_id: a.task_id ?? undefined, for_user: a.for_user ?? undefined },
      );
      p.log.info({ approval: a.id, approve, by }, 'approval decided');
      return a;
    },
    /** Approves a toolset's withheld upstream tools (all, or the named ones), audited. */
    async approveToolset(id: string, reviewed: readonly { name: string; hash: string }[]) {
      if (!p.catalog.toolset(id))
        throw new Refusal('not_found', `Unknown toolset ${id}. Valid ids: ${p.validIds()}`);
      let outcome: Awaited<ReturnType<typeof p.catalog.approve>>;
      try {
        outcome = await p.catalog.approve(id, reviewed);
      } catch (err) {
        if (err instanceof CatalogError) throw new Refusal('invalid_arguments', err.message);
        throw err;
      }
      const { approved, changedSinceShown } = outcome;
      const stale = changedSinceShown.map((c) => c.name);
      p.audit({
        session_id: null,
        kind: 'approve',
        subject: id,
        ok: approved.length > 0,
        detail: `${approved.join(',') || 'none'}${stale.length > 0 ? `; changed since shown, still withheld: ${stale.join(',')}` : ''}`,
      });
      p.log.info({ toolset: id, approved, changed_since_shown: stale }, 'upstream tools approved');
      if (approved.length === 0) {
        throw new Refusal(
          'conflict',
          `Nothing approved in ${id}: ${stale.join(', ')} changed since ` +
            `${stale.length === 1 ? 'it was shown and stays' : 'they were shown and stay'} withheld; review the ` +
            'new definition in GET /mcp/admin/toolsets and approve its new hash',
        );
      }
      return {
        toolset_id: id,
        approved,
        changed_since_shown: changedSinceShown,
        toolset: (await p.listToolsets()).toolsets.find((t) => t.id === id),
      };
    },

    /** Re-reads the toolsets directory; an invalid directory is a 400 and changes nothing. */
    async reloadToolsets() {
      try {
        const result = await p.catalog.reload();
        p.audit({
          session_id: null,
          kind: 'reload',
          subject: 'toolsets',
          ok: true,
          detail: JSON.stringify(result),
        });
        p.log.info(result, 'toolsets reloaded');
        return result;
      } catch (err) {
        if (!(err instanceof CatalogError)) throw err;
        p.audit({
          session_id: null,
          kind: 'reload',
          subject: 'toolsets',
          ok: false,
          detail: err.message,
        });
        throw new Refusal(
          'invalid_config',
          `Reload refused, the running catalog is unchanged: ${err.message}`,
        );
      }
    },
  };
}
