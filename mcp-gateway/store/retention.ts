import type { Config } from '../../lib/config.ts';
import type { RetentionRule } from '../../lib/retention.ts';
import type { ApprovalStore } from '../ceiling/approvals.ts';
import type { HandleStore } from '../face/handles.ts';
import type { GatewayStore } from './store.ts';

// What the gateway prunes (README "Limits and retention"): audit rows by age and by count, approvals decided or
// expired long ago, MCP handles idle past their lifetime (with their sessions), and sessions idle for long.
// A setting of 0 days keeps that kind of row for ever; the audit row cap always applies.

/** The gateway's rules, in order: handles go before the idle-session rule looks for sessions without one. */
export function gatewayRetentionRules(
  keep: Config['retention'],
  stores: { store: GatewayStore; approvals: ApprovalStore; handles: HandleStore },
): RetentionRule[] {
  const { store, approvals, handles } = stores;
  const iso = (now: number, ms: number) => new Date(now - ms).toISOString();
  const rules: RetentionRule[] = [];
  if (keep.auditMs > 0)
    rules.push({ name: 'audit', step: (limit, now) => store.pruneAudit(iso(now, keep.auditMs), limit) });
  rules.push({ name: 'audit_over_cap', step: (limit) => store.pruneAuditOverflow(keep.auditMaxRows, limit) });
  if (keep.approvalMs > 0)
    rules.push({ name: 'approvals', step: (limit, now) => approvals.prune(now - keep.approvalMs, limit) });
  // mint() sweeps too, but only when a handle is minted; this catches a quiet face (one pass deletes all).
  rules.push({ name: 'mcp_handles', step: () => handles.sweep() });
  if (keep.sessionMs > 0)
    rules.push({
      name: 'sessions',
      step: (limit, now) => store.pruneIdleSessions(iso(now, keep.sessionMs), limit),
    });
  return rules;
}
