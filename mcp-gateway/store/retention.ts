import type { Config } from '../../lib/config/config.ts';
import type { RetentionRule } from '../../lib/db/retention.ts';
import { LEARNING } from '../catalog/learned.ts';
import type { CallKeyQueries, GatewayStore } from './interface.ts';

// What the gateway prunes (README "Limits and retention"): audit rows by age and by count, approvals decided or
// expired long ago, MCP handles idle past their lifetime (with their sessions), sessions idle for long, and
// the keys of calls (with the tasks' fences) once as old as the tasks kept (TASK_RETENTION_DAYS).
// A setting of 0 days keeps that kind of row for ever; the audit row cap always applies.

/** The gateway's rules, in order: handles go before the idle-session rule looks for sessions without one. */
export function gatewayRetentionRules(
  keep: Config['retention'],
  stores: {
    store: GatewayStore;
    /** The approvals' rules (ceiling/approvals.ts): prune expires the overdue first. */
    approvals: { prune(before: number, limit: number): Promise<number> };
    /** The handles' rules (face/handles.ts): a sweep takes the handles' sessions with them. */
    handles: { sweep(): Promise<number> };
    callKeys?: CallKeyQueries;
    /** The users' limits' counts (lib/identity): a window's row is of no use once it ended. */
    usage?: { pruneUsage(before: number): Promise<number> };
  },
): RetentionRule[] {
  const { store, approvals, handles, callKeys, usage } = stores;
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
  // A call's key answers its repeats for as long as its task is kept (a task may wait days for a human).
  if (callKeys && keep.taskMs > 0)
    rules.push({ name: 'call_keys', step: (limit, now) => callKeys.prune(now - keep.taskMs, limit) });
  // A learned term unused for seven half-lives has faded below use whatever its weight (catalog/learned.ts).
  rules.push({
    name: 'learned_keywords',
    step: (_limit, now) => store.pruneLearned(now - 7 * LEARNING.halfLifeMs),
  });
  // The longest window is a day: a count that started two days ago is over (all such rows in one statement).
  if (usage)
    rules.push({ name: 'identity_usage', step: (_limit, now) => usage.pruneUsage(now - 2 * DAY_MS) });
  return rules;
}

const DAY_MS = 86_400_000;
