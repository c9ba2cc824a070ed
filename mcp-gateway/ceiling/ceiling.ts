import { currentActor } from '../audit-context.ts';
import { Refusal } from '../refusals.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { ApprovalStore, ApprovalSubject } from './approvals.ts';
import { type Limits, sessionLimits } from './limits.ts';
import {
  denyAllPolicy,
  loadPolicy,
  type Policy,
  PolicyError,
  type PolicySubject,
  type Verdict,
} from './policy.ts';
import { requireApprovals } from './require-approvals.ts';

export type { Limits };

// The operator's ceiling on what the model may do, beyond which toolsets are enabled: the policy (deny / ask
// / allow), human approvals for `ask`, and rate limits. The gateway calls it on every path (REST and MCP)
// before a tool runs or a toolset is activated; every refusal is audited. The rate limits are limits.ts's, the
// approvals a check asks for require-approvals.ts's.

/** What the ceiling needs. */
export interface CeilingOptions {
  policyFile: string;
  approvals: ApprovalStore;
  limits: Limits;
  audit: (entry: AuditEntry) => void;
  now?: () => number;
  /** The policy overlays of the teams of user `forUser` (`user:<id>`), applied on top of the policy file. */
  teamPolicies?: (forUser: string) => Promise<readonly { team: string; policy: Policy }[]>;
}

/** The ceiling of one gateway. */
export type Ceiling = ReturnType<typeof createCeiling>;

/** "3 rules, default ask"; "no file: everything allowed"; or why everything is denied. */
function policySummary(p: ReturnType<Policy['describe']>): string {
  if (p.error) return `did not load, everything is denied until it does (${p.error})`;
  if (p.file === null) return 'no file: everything allowed';
  return `${p.rules.length} rule${p.rules.length === 1 ? '' : 's'}, default ${p.default}`;
}

/** The tool a call names, as the ceiling weighs it. */
type CalledTool = { name: string; toolset: string; annotations: Record<string, unknown> };

/** What the ceiling's checks share: its options, the policy in force (replaced on reload) and the rate limits. */
interface CeilingState {
  readonly opts: CeilingOptions;
  readonly limits: ReturnType<typeof sessionLimits>;
  policy: Policy;
}

/** Audits a policy file that did not load. */
function auditPolicyError(opts: CeilingOptions, err: PolicyError): void {
  opts.audit({ session_id: null, kind: 'policy', subject: opts.policyFile, ok: false, detail: err.message });
}

/**
 * Loads the policy and returns the checks. A policy file that does not load (bad YAML, an alias bomb, a bad
 * rule) does not stop the gateway: it runs denying everything, the file's error as the reason and in
 * policy().error, until the file is fixed and reloaded.
 */
export function createCeiling(opts: CeilingOptions) {
  let policy: Policy;
  try {
    policy = loadPolicy(opts.policyFile);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    auditPolicyError(opts, err);
    policy = denyAllPolicy(opts.policyFile, err.message);
  }
  const st: CeilingState = {
    opts,
    limits: sessionLimits(opts.limits, opts.audit, opts.now ?? Date.now),
    policy,
  };

  return {
    /** The policy in force, in a line (the file, its rules and default, or that there is none). */
    policySummary: () =>
      `${st.policy.describe().file ?? opts.policyFile}: ${policySummary(st.policy.describe())}`,
    /** The approvals table (listing, deciding). */
    approvals: opts.approvals,
    /** The policy as loaded. */
    policy: () => st.policy.describe(),
    /** Re-reads POLICY_FILE; a malformed file is a 400 naming the rule, and the running policy stays. */
    reloadPolicy: () => reloadPolicy(st),
    /** Forgets an ended session's rate-limit window and activation count (a task's count is kept). */
    forgetSession: (sessionId: string): void => st.limits.forget(sessionId),

    /**
     * Why the policy denies activating `toolsetId` now, or null when it does not. A fixed view asks on every
     * request, so a toolset the policy came to deny after its view activated it stops being served.
     */
    activationDenied(toolsetId: string): string | null {
      const verdict = st.policy.decide({ on: 'activate', toolset: toolsetId });
      return verdict.decision === 'deny'
        ? `Denied by the operator's policy: toolset ${toolsetId} may not be activated (${verdict.reason})`
        : null;
    },

    /** Whether the policy lets `toolsetId` be activated without a human (neither deny nor ask). */
    activationFree(toolsetId: string): boolean {
      return st.policy.decide({ on: 'activate', toolset: toolsetId }).decision === 'allow';
    },

    /** Before a call runs: the rate limit, then the policy (deny, or ask: an approval). */
    checkCall: (sessionId: string, tool: CalledTool, args: Record<string, unknown>): Promise<void> =>
      checkCall(st, sessionId, tool, args),

    /** Before toolsets are activated: the per-task cap, then the policy for each one. */
    checkActivation: (sessionId: string, ids: readonly string[]): Promise<void> =>
      checkActivation(st, sessionId, ids),
  };
}

function reloadPolicy(st: CeilingState): ReturnType<Policy['describe']> {
  const { opts } = st;
  try {
    st.policy = loadPolicy(opts.policyFile);
  } catch (err) {
    if (err instanceof PolicyError) {
      auditPolicyError(opts, err);
      throw new Refusal('invalid_config', err.message);
    }
    throw err;
  }
  const described = st.policy.describe();
  opts.audit({
    session_id: null,
    kind: 'policy',
    subject: opts.policyFile,
    ok: true,
    detail: policySummary(described),
  });
  return described;
}

async function checkCall(
  st: CeilingState,
  sessionId: string,
  tool: CalledTool,
  args: Record<string, unknown>,
): Promise<void> {
  st.limits.call(sessionId);
  const verdict = await verdictOf(st, {
    on: 'call',
    tool: tool.name,
    toolset: tool.toolset,
    annotations: tool.annotations,
  });
  if (verdict.decision === 'deny') {
    const message = `Denied by ${verdict.by}: ${tool.name} may not be called (${verdict.reason})`;
    st.opts.audit({ session_id: sessionId, kind: 'call', subject: tool.name, ok: false, detail: message });
    throw new Refusal('denied', message);
  }
  if (verdict.decision === 'ask') {
    const { task_id, for_user, in_script } = currentActor();
    if (in_script) {
      // A script cannot pause for a human, and an approval it asked for would wait for a call nobody makes.
      const message =
        `${tool.name} needs a human's approval under ${verdict.by} (${verdict.reason}), and a run_code script ` +
        `cannot wait for one: call it alone, outside a script (run_code {"tool": "${tool.name}", "arguments": {…}})`;
      st.opts.audit({ session_id: sessionId, kind: 'call', subject: tool.name, ok: false, detail: message });
      throw new Refusal('direct_call_only', message);
    }
    await requireApprovals(
      st.opts.approvals,
      st.opts.audit,
      [
        {
          session_id: sessionId,
          task_id,
          for_user,
          kind: 'call',
          subject: tool.name,
          arguments: args,
          reason: verdict.reason,
        },
      ],
      (s) => `calling ${s.subject} with these arguments`,
    );
  }
}

const STRICTNESS: Record<Verdict['decision'], number> = { allow: 0, ask: 1, deny: 2 };

/**
 * The verdict on `subject`: the operator's policy's, made stricter (never looser) by the policy overlays of the
 * teams of the user whose work the request is; `by` names whose policy gave it.
 */
async function verdictOf(st: CeilingState, subject: PolicySubject): Promise<Verdict & { by: string }> {
  let verdict = { ...st.policy.decide(subject), by: "the operator's policy" };
  const forUser = currentActor().for_user;
  if (verdict.decision === 'deny' || !forUser || !st.opts.teamPolicies) return verdict;
  for (const { team, policy } of await st.opts.teamPolicies(forUser)) {
    const theirs = policy.decide(subject);
    if (STRICTNESS[theirs.decision] > STRICTNESS[verdict.decision]) {
      verdict = { ...theirs, by: `team ${team}'s policy` };
    }
  }
  return verdict;
}

async function checkActivation(st: CeilingState, sessionId: string, ids: readonly string[]): Promise<void> {
  const { task_id: taskId, for_user } = currentActor();
  const count = st.limits.activations(sessionId, taskId, ids);
  const asks: ApprovalSubject[] = [];
  for (const id of ids) {
    const verdict = await verdictOf(st, { on: 'activate', toolset: id });
    if (verdict.decision === 'deny') {
      const message = `Denied by ${verdict.by}: toolset ${id} may not be activated (${verdict.reason})`;
      st.opts.audit({ session_id: sessionId, kind: 'activate', subject: id, ok: false, detail: message });
      throw new Refusal('denied', message);
    }
    if (verdict.decision === 'ask') {
      asks.push({
        session_id: sessionId,
        task_id: taskId,
        for_user,
        kind: 'activate',
        subject: id,
        reason: verdict.reason,
      });
    }
  }
  if (asks.length > 0 && currentActor().unasked) {
    // Activation without a turn, or the agent's own for a goal, never asks a human: the model's ACTIVATE will.
    const message = `activating ${asks.map((a) => a.subject).join(', ')} needs a human's approval (${asks[0].reason}); ask for it with manage_toolsets ACTIVATE`;
    st.opts.audit({
      session_id: sessionId,
      kind: 'activate',
      subject: ids.join(','),
      ok: false,
      detail: message,
    });
    throw new Refusal('approval_needed', message);
  }
  if (asks.length > 0) {
    await requireApprovals(st.opts.approvals, st.opts.audit, asks, (s) => `activating toolset ${s.subject}`);
  }
  // Counted once approved: another activation of the task may have been counted while this one waited.
  count();
}
