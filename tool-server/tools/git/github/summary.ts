import { z } from 'zod';
import { ToolError } from '../../../kit/errors.ts';

// Turning GitHub's review and check answers into the few facts a reviewer asks for: who approved or asked
// for changes (each reviewer's latest decisive review, as GitHub's own review decision counts them), and
// whether the head commit's checks pass (check runs and commit statuses together).

const Review = z.object({
  user: z.object({ login: z.string() }).nullable(),
  state: z.string(),
  submitted_at: z.string().nullable().optional(),
});

const CheckRuns = z.object({
  total_count: z.number(),
  check_runs: z.array(
    z.object({
      name: z.string(),
      status: z.string(),
      conclusion: z.string().nullable(),
      html_url: z.string().nullable().optional(),
      app: z.object({ slug: z.string().optional() }).nullable().optional(),
    }),
  ),
});

const CombinedStatus = z.object({
  state: z.string(),
  total_count: z.number(),
  statuses: z.array(
    z.object({
      context: z.string(),
      state: z.string(),
      description: z.string().nullable().optional(),
      target_url: z.string().nullable().optional(),
    }),
  ),
});

function parse<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ToolError(`GitHub's answer for ${what} is not the expected shape`);
  return parsed.data;
}

/** reviewSummary's answer, as get_github_pull_request_info returns it. */
export const ReviewSummary = z.object({
  decision: z.enum(['changes_requested', 'approved', 'none']),
  approved: z.number(),
  changes_requested: z.number(),
  commented: z.number(),
  by_reviewer: z.array(
    z.object({
      login: z.string(),
      state: z.string().describe('APPROVED, CHANGES_REQUESTED, DISMISSED or COMMENTED'),
      submitted_at: z.string().nullable(),
    }),
  ),
  reviews_read: z.number(),
});

const DECISIVE = new Set(['APPROVED', 'CHANGES_REQUESTED', 'DISMISSED']);

/** Each reviewer's standing (latest decisive review, else latest comment) and the overall decision. */
export function reviewSummary(raw: unknown): z.infer<typeof ReviewSummary> {
  const reviews = parse(z.array(Review), raw, 'the reviews');
  const latest = new Map<string, { login: string; state: string; submitted_at: string | null }>();
  for (const r of reviews) {
    if (r.state === 'PENDING' || !r.user) continue;
    const before = latest.get(r.user.login);
    if (r.state === 'COMMENTED' && before && DECISIVE.has(before.state)) continue;
    latest.set(r.user.login, { login: r.user.login, state: r.state, submitted_at: r.submitted_at ?? null });
  }
  const byReviewer = [...latest.values()];
  const count = (state: string) => byReviewer.filter((r) => r.state === state).length;
  const approved = count('APPROVED');
  const changesRequested = count('CHANGES_REQUESTED');
  return {
    decision: changesRequested > 0 ? 'changes_requested' : approved > 0 ? 'approved' : 'none',
    approved,
    changes_requested: changesRequested,
    commented: count('COMMENTED'),
    by_reviewer: byReviewer,
    reviews_read: reviews.length,
  };
}

const FAILED = new Set([
  'failure',
  'timed_out',
  'cancelled',
  'action_required',
  'startup_failure',
  'stale',
  'error',
]);

/** checksSummary's answer, as get_github_pull_request_info returns it. */
export const ChecksSummary = z.object({
  state: z.enum(['failure', 'pending', 'none', 'success']),
  total: z.number(),
  passed: z.number(),
  failed: z.number(),
  pending: z.number(),
  skipped: z.number(),
  runs: z.array(
    z.object({
      name: z.string(),
      source: z.enum(['check_run', 'status']),
      app: z.string().nullable(),
      status: z.string(),
      conclusion: z.string().nullable(),
      url: z.string().nullable(),
    }),
  ),
  truncated: z.boolean().describe('GitHub has more check runs than were read'),
});

/** The head commit's check runs and commit statuses as one pass/fail/pending summary. */
export function checksSummary(rawRuns: unknown, rawStatus: unknown): z.infer<typeof ChecksSummary> {
  const runs = parse(CheckRuns, rawRuns, 'the check runs');
  const status = parse(CombinedStatus, rawStatus, 'the commit status');
  const items = [
    ...runs.check_runs.map((r) => ({
      name: r.name,
      source: 'check_run' as const,
      app: r.app?.slug ?? null,
      status: r.status,
      conclusion: r.conclusion,
      url: r.html_url ?? null,
    })),
    ...status.statuses.map((s) => ({
      name: s.context,
      source: 'status' as const,
      app: null,
      status: s.state === 'pending' ? 'pending' : 'completed',
      conclusion: s.state === 'pending' ? null : s.state,
      url: s.target_url ?? null,
    })),
  ];
  const outcome = (i: (typeof items)[number]) => {
    if (i.status !== 'completed') return 'pending';
    if (i.conclusion === 'success') return 'passed';
    if (i.conclusion !== null && FAILED.has(i.conclusion)) return 'failed';
    return 'skipped'; // neutral, skipped
  };
  const tally = { passed: 0, failed: 0, pending: 0, skipped: 0 };
  for (const i of items) tally[outcome(i)]++;
  const total = items.length;
  const state =
    tally.failed > 0 ? 'failure' : tally.pending > 0 ? 'pending' : total === 0 ? 'none' : 'success';
  return {
    state,
    total,
    ...tally,
    runs: items,
    truncated: runs.total_count > runs.check_runs.length,
  };
}
