import { Refusal } from '../refusals.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { Approval, ApprovalStore, ApprovalSubject } from './approvals.ts';

/**
 * Spends the approvals of `subjects` when every one is approved; otherwise records each missing one as
 * pending and refuses with 409 (spending none, so a retry after the approvals finds them all).
 */
export async function requireApprovals(
  approvals: ApprovalStore,
  audit: (entry: AuditEntry) => void,
  subjects: ApprovalSubject[],
  what: (s: ApprovalSubject) => string,
): Promise<void> {
  const unapproved = async () => {
    const approved = await Promise.all(subjects.map((s) => approvals.approved(s)));
    return subjects.filter((_, i) => !approved[i]);
  };
  let missing = await unapproved();
  if (missing.length === 0) {
    // All or none, once: another gateway on the same database may have spent one since.
    const spent = await approvals.spend(subjects);
    if (spent) {
      for (const a of spent) {
        audit({
          session_id: a.session_id,
          kind: 'approval',
          subject: a.subject,
          ok: true,
          detail: `used ${a.id} (approved by ${a.decided_by})`,
        });
      }
      return;
    }
    missing = await unapproved();
  }
  const pending: Approval[] = [];
  for (const s of missing) pending.push(await approvals.request(s));
  for (const p of pending) {
    audit({
      session_id: p.session_id,
      kind: p.kind,
      subject: p.subject,
      ok: false,
      detail: `awaiting approval ${p.id}`,
    });
  }
  const listed = pending
    .map((p, i) => `${what(missing[i])} (approval ${p.id}: ${missing[i].reason})`)
    .join('; ');
  throw new Refusal(
    'approval_needed',
    `Approval needed under the operator's policy: ${listed}. Pending until ${pending[0].expires_at}; once approved, ` +
      'make the same request again.',
    { approval: pending[0], approvals: pending },
  );
}
