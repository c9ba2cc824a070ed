import { currentActor } from '../audit-context.ts';
import { Refusal } from '../refusals.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { Approval, ApprovalStore, ApprovalSubject } from './approvals.ts';
import { denyAllPolicy, loadPolicy, type Policy, PolicyError } from './policy.ts';

// The operator's ceiling on what the model may do, beyond which toolsets are enabled: the policy (deny / ask
// / allow), human approvals for `ask`, and rate limits. The gateway calls it on every path (REST and MCP)
// before a tool runs or a toolset is activated; every refusal is audited.

/** Limits per session. */
export interface Limits {
  /** Tool calls per session per rolling minute (429 with retry-after beyond). */
  callsPerMinute: number;
  /** Toolset activations per task (per session when no task is known). */
  activationsPerTask: number;
}

/** What the ceiling needs. */
export interface CeilingOptions {
  policyFile: string;
  approvals: ApprovalStore;
  limits: Limits;
  audit: (entry: AuditEntry) => void;
  now?: () => number;
}

/** The ceiling of one gateway. */
export type Ceiling = ReturnType<typeof createCeiling>;

/**
 * Loads the policy and returns the checks. A policy file that does not load (bad YAML, an alias bomb, a bad
 * rule) does not stop the gateway: it runs denying everything, the file's error as the reason and in
 * policy().error, until the file is fixed and reloaded.
 */
/** "3 rules, default ask"; "no file: everything allowed"; or why everything is denied. */
function policySummary(p: ReturnType<Policy['describe']>): string {
  if (p.error) return `did not load, everything is denied until it does (${p.error})`;
  if (p.file === null) return 'no file: everything allowed';
  return `${p.rules.length} rule${p.rules.length === 1 ? '' : 's'}, default ${p.default}`;
}

export function createCeiling(opts: CeilingOptions) {
  const now = opts.now ?? Date.now;
  let policy: Policy;
  try {
    policy = loadPolicy(opts.policyFile);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    opts.audit({
      session_id: null,
      kind: 'policy',
      subject: opts.policyFile,
      ok: false,
      detail: err.message,
    });
    policy = denyAllPolicy(opts.policyFile, err.message);
  }
  const calls = new Map<string, number[]>();
  const activations = new Map<string, number>();

  /**
   * Spends the approvals of `subjects` when every one is approved; otherwise records each missing one as
   * pending and refuses with 409 (spending none, so a retry after the approvals finds them all).
   */
  async function requireApprovals(
    subjects: ApprovalSubject[],
    what: (s: ApprovalSubject) => string,
  ): Promise<void> {
    const unapproved = async () => {
      const approved = await Promise.all(subjects.map((s) => opts.approvals.approved(s)));
      return subjects.filter((_, i) => !approved[i]);
    };
    let missing = await unapproved();
    if (missing.length === 0) {
      // All or none, once: another gateway on the same database may have spent one since.
      const spent = await opts.approvals.spend(subjects);
      if (spent) {
        for (const a of spent) {
          opts.audit({
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
    for (const s of missing) pending.push(await opts.approvals.request(s));
    for (const p of pending) {
      opts.audit({
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

  function rateLimit(sessionId: string): void {
    const windowStart = now() - 60_000;
    // Times are appended in order: drop the expired ones from the front, in place (no copy per call).
    const recent = calls.get(sessionId) ?? [];
    let expired = 0;
    while (expired < recent.length && recent[expired] <= windowStart) expired++;
    if (expired > 0) recent.splice(0, expired);
    if (recent.length >= opts.limits.callsPerMinute) {
      const retryAfter = Math.max(1, Math.ceil((recent[0] - windowStart) / 1000));
      opts.audit({
        session_id: sessionId,
        kind: 'limit',
        subject: 'calls_per_minute',
        ok: false,
        detail: `${recent.length} calls`,
      });
      throw new Refusal(
        'rate_limited',
        `Rate limit: this session made ${recent.length} tool calls in the last minute (the limit is ` +
          `${opts.limits.callsPerMinute}); retry after ${retryAfter} s`,
        { retry_after_s: retryAfter },
      );
    }
    recent.push(now());
    calls.set(sessionId, recent);
  }

  return {
    /** The policy in force, in a line (the file, its rules and default, or that there is none). */
    policySummary: () => `${policy.describe().file ?? opts.policyFile}: ${policySummary(policy.describe())}`,
    /** The approvals table (listing, deciding). */
    approvals: opts.approvals,
    /** The policy as loaded. */
    policy: () => policy.describe(),
    /** Re-reads POLICY_FILE; a malformed file is a 400 naming the rule, and the running policy stays. */
    reloadPolicy() {
      try {
        policy = loadPolicy(opts.policyFile);
      } catch (err) {
        if (err instanceof PolicyError) {
          opts.audit({
            session_id: null,
            kind: 'policy',
            subject: opts.policyFile,
            ok: false,
            detail: err.message,
          });
          throw new Refusal('invalid_config', err.message);
        }
        throw err;
      }
      const described = policy.describe();
      opts.audit({
        session_id: null,
        kind: 'policy',
        subject: opts.policyFile,
        ok: true,
        detail: policySummary(described),
      });
      return described;
    },

    /** Forgets an ended session's rate-limit window and activation count (a task's count is kept). */
    forgetSession(sessionId: string): void {
      calls.delete(sessionId);
      activations.delete(`session:${sessionId}`);
    },

    /**
     * Why the policy denies activating `toolsetId` now, or null when it does not. A fixed view asks on every
     * request, so a toolset the policy came to deny after its view activated it stops being served.
     */
    activationDenied(toolsetId: string): string | null {
      const verdict = policy.decide({ on: 'activate', toolset: toolsetId });
      return verdict.decision === 'deny'
        ? `Denied by the operator's policy: toolset ${toolsetId} may not be activated (${verdict.reason})`
        : null;
    },

    /** Whether the policy lets `toolsetId` be activated without a human (neither deny nor ask). */
    activationFree(toolsetId: string): boolean {
      return policy.decide({ on: 'activate', toolset: toolsetId }).decision === 'allow';
    },

    /** Before a call runs: the rate limit, then the policy (deny, or ask: an approval). */
    async checkCall(
      sessionId: string,
      tool: { name: string; toolset: string; annotations: Record<string, unknown> },
      args: Record<string, unknown>,
    ): Promise<void> {
      rateLimit(sessionId);
      const verdict = policy.decide({
        on: 'call',
        tool: tool.name,
        toolset: tool.toolset,
        annotations: tool.annotations,
      });
      if (verdict.decision === 'deny') {
        const message = `Denied by the operator's policy: ${tool.name} may not be called (${verdict.reason})`;
        opts.audit({ session_id: sessionId, kind: 'call', subject: tool.name, ok: false, detail: message });
        throw new Refusal('denied', message);
      }
      if (verdict.decision === 'ask') {
        await requireApprovals(
          [
            {
              session_id: sessionId,
              task_id: currentActor().task_id,
              kind: 'call',
              subject: tool.name,
              arguments: args,
              reason: verdict.reason,
            },
          ],
          (s) => `calling ${s.subject} with these arguments`,
        );
      }
    },

    /** Before toolsets are activated: the per-task cap, then the policy for each one. */
    async checkActivation(sessionId: string, ids: readonly string[]): Promise<void> {
      const taskId = currentActor().task_id;
      const key = taskId ? `task:${taskId}` : `session:${sessionId}`;
      const count = activations.get(key) ?? 0;
      if (count + ids.length > opts.limits.activationsPerTask) {
        opts.audit({
          session_id: sessionId,
          kind: 'limit',
          subject: 'activations_per_task',
          ok: false,
          detail: ids.join(','),
        });
        throw new Refusal(
          'rate_limited',
          `Activation limit: ${taskId ? 'this task' : 'this session'} has activated toolsets ${count} times (the limit is ` +
            `${opts.limits.activationsPerTask}); work with the toolsets already active`,
        );
      }
      const asks: ApprovalSubject[] = [];
      for (const id of ids) {
        const verdict = policy.decide({ on: 'activate', toolset: id });
        if (verdict.decision === 'deny') {
          const message = `Denied by the operator's policy: toolset ${id} may not be activated (${verdict.reason})`;
          opts.audit({ session_id: sessionId, kind: 'activate', subject: id, ok: false, detail: message });
          throw new Refusal('denied', message);
        }
        if (verdict.decision === 'ask') {
          asks.push({
            session_id: sessionId,
            task_id: taskId,
            kind: 'activate',
            subject: id,
            reason: verdict.reason,
          });
        }
      }
      if (asks.length > 0) await requireApprovals(asks, (s) => `activating toolset ${s.subject}`);
      // Counted once approved: another activation of the task may have been counted while this one waited.
      activations.set(key, (activations.get(key) ?? 0) + ids.length);
    },
  };
}
