import { Refusal } from '../refusals.ts';
import type { AuditEntry } from '../store/audit.ts';

// The ceiling's rate limits, kept in this gateway's memory: tool calls per session per rolling minute, and
// toolset activations per task (per session when no task is known).

/** Limits per session. */
export interface Limits {
  /** Tool calls per session per rolling minute (429 with retry-after beyond). */
  callsPerMinute: number;
  /** Toolset activations per task (per session when no task is known). */
  activationsPerTask: number;
}

export function sessionLimits(limits: Limits, audit: (entry: AuditEntry) => void, now: () => number) {
  const calls = new Map<string, number[]>();
  const activations = new Map<string, number>();
  return {
    /** Counts a call of the session in its rolling minute; refuses (rate_limited, with retry_after_s) beyond. */
    call(sessionId: string): void {
      const windowStart = now() - 60_000;
      // Times are appended in order: drop the expired ones from the front, in place (no copy per call).
      const recent = calls.get(sessionId) ?? [];
      let expired = 0;
      while (expired < recent.length && recent[expired] <= windowStart) expired++;
      if (expired > 0) recent.splice(0, expired);
      if (recent.length >= limits.callsPerMinute) {
        const retryAfter = Math.max(1, Math.ceil((recent[0] - windowStart) / 1000));
        audit({
          session_id: sessionId,
          kind: 'limit',
          subject: 'calls_per_minute',
          ok: false,
          detail: `${recent.length} calls`,
        });
        throw new Refusal(
          'rate_limited',
          `Rate limit: this session made ${recent.length} tool calls in the last minute (the limit is ` +
            `${limits.callsPerMinute}); retry after ${retryAfter} s`,
          { retry_after_s: retryAfter },
        );
      }
      recent.push(now());
      calls.set(sessionId, recent);
    },
    /**
     * Refuses activating `ids` beyond the task's (or session's) cap; else returns the count to add them to once
     * they are activated (another activation may be counted meanwhile).
     */
    activations(sessionId: string, taskId: string | null | undefined, ids: readonly string[]): () => void {
      const key = taskId ? `task:${taskId}` : `session:${sessionId}`;
      const count = activations.get(key) ?? 0;
      if (count + ids.length > limits.activationsPerTask) {
        audit({
          session_id: sessionId,
          kind: 'limit',
          subject: 'activations_per_task',
          ok: false,
          detail: ids.join(','),
        });
        throw new Refusal(
          'rate_limited',
          `Activation limit: ${taskId ? 'this task' : 'this session'} has activated toolsets ${count} times (the limit is ` +
            `${limits.activationsPerTask}); work with the toolsets already active`,
        );
      }
      return () => activations.set(key, (activations.get(key) ?? 0) + ids.length);
    },
    /** Forgets an ended session's rate-limit window and activation count (a task's count is kept). */
    forget(sessionId: string): void {
      calls.delete(sessionId);
      activations.delete(`session:${sessionId}`);
    },
  };
}
