import { z } from 'zod';
import { defineTool, READ_ONLY } from '../../../kit/define.ts';
import { ToolError } from '../../../kit/errors.ts';
import type { GitToolContext } from '../context.ts';
import { capText } from '../parse.ts';
import { type GitHubClient, githubClient } from './api.ts';
import { ChecksSummary, checksSummary, ReviewSummary, reviewSummary } from './summary.ts';

// get_github_pull_request_info: one pull request with its files, reviews and checks, from the GitHub
// REST API. The pull request itself must load; the files, reviews and checks each report their own
// failure (a token without the checks permission still gets the rest).

const Login = z.object({ login: z.string() }).nullable();
const Branch = z.object({
  ref: z.string(),
  sha: z.string(),
  repo: z.object({ full_name: z.string() }).nullable(),
});

/** The fields of GET /repos/{owner}/{repo}/pulls/{number} that the result uses. */
const PullRequest = z.object({
  html_url: z.string(),
  number: z.number(),
  title: z.string(),
  state: z.string(),
  draft: z.boolean().optional(),
  merged: z.boolean().optional(),
  user: Login,
  body: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  closed_at: z.string().nullable(),
  merged_at: z.string().nullable(),
  base: Branch,
  head: Branch,
  labels: z.array(z.object({ name: z.string() })).default([]),
  requested_reviewers: z.array(z.object({ login: z.string() })).default([]),
  mergeable: z.boolean().nullable().optional(),
  mergeable_state: z.string().optional(),
  commits: z.number().optional(),
  additions: z.number().optional(),
  deletions: z.number().optional(),
  changed_files: z.number().optional(),
  comments: z.number().optional(),
  review_comments: z.number().optional(),
});

const PullFile = z.object({
  filename: z.string(),
  status: z.string(),
  additions: z.number(),
  deletions: z.number(),
  changes: z.number().optional(),
  previous_filename: z.string().optional(),
});

/** Longest PR body returned; GitHub allows 65,536 characters. */
const BODY_CHARS = 16_000;
const PER_PAGE = 100;

/** Parses one API answer with its schema, or says which field GitHub did not send as expected. */
function shape<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ToolError(
      `GitHub's answer for ${what} is not the expected shape (${issue.path.join('.')}: ${issue.message})`,
    );
  }
  return parsed.data;
}

/** owner, repo and number from a pull request URL on github.com (or on the configured Enterprise host). */
function parsePullUrl(text: string, apiUrl: string): { owner: string; repo: string; number: number } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ToolError(
      `${JSON.stringify(text)} is not a URL; give e.g. https://github.com/OWNER/REPO/pull/123`,
    );
  }
  const api = new URL(apiUrl);
  const hosts = new Set(['github.com', 'www.github.com']);
  if (api.hostname !== 'api.github.com') hosts.add(api.hostname);
  if (!hosts.has(url.hostname)) {
    throw new ToolError(
      `${url.hostname} is not a GitHub host this tool-server reads (${[...hosts].join(', ')})`,
    );
  }
  const m = /^\/([^/]+)\/([^/]+)\/pulls?\/(\d+)(?:\/.*)?$/.exec(url.pathname);
  if (!m)
    throw new ToolError(`${text} is not a pull request URL; expected https://github.com/OWNER/REPO/pull/123`);
  return { owner: m[1], repo: m[2], number: Number(m[3]) };
}

const OwnerName = z
  .string()
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/, 'a GitHub user or organisation name');
const RepoName = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,100}$/, 'a repository name (letters, digits, ".", "_", "-")')
  .refine((s) => s !== '.' && s !== '..', 'a repository name');

/** Every page of the files list, up to `max` files. */
async function pullFiles(api: GitHubClient, base: string, what: string, max: number) {
  const files: z.output<typeof PullFile>[] = [];
  for (let page = 1; files.length < max; page++) {
    const batch = shape(
      z.array(PullFile),
      await api.get(`${base}/files?per_page=${PER_PAGE}&page=${page}`, `the files of ${what}`),
      `the files of ${what}`,
    );
    files.push(...batch);
    if (batch.length < PER_PAGE) break;
  }
  return files.slice(0, max);
}

/** One section of the result; its failure is reported in place instead of failing the call. */
async function section<T>(work: () => Promise<T>): Promise<T | { error: string }> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ToolError) return { error: err.message };
    throw err;
  }
}

/** Which pull request: owner, repo and number. */
interface Pull {
  owner: string;
  repo: string;
  number: number;
}

/** The pull request the arguments name, by URL or by owner, repo and number (not both). */
function pullOf(
  args: { url?: string; owner?: string; repo?: string; number?: number },
  apiUrl: string,
): Pull {
  const byParts = args.owner !== undefined || args.repo !== undefined || args.number !== undefined;
  if (args.url !== undefined && byParts)
    throw new ToolError('Give either url, or owner, repo and number; not both');
  if (args.url !== undefined) {
    const target = parsePullUrl(args.url, apiUrl);
    shape(OwnerName, target.owner, 'the URL');
    shape(RepoName, target.repo, 'the URL');
    return target;
  }
  if (args.owner !== undefined && args.repo !== undefined && args.number !== undefined) {
    return { owner: args.owner, repo: args.repo, number: args.number };
  }
  throw new ToolError('Give the pull request: url, or all of owner, repo and number');
}

const pullPath = (t: Pull) => `/repos/${t.owner}/${t.repo}/pulls/${t.number}`;

type Pr = z.output<typeof PullRequest>;

/** The files, reviews and checks, read at once; each reports its own failure. */
async function pullSections(api: GitHubClient, target: Pull, pr: Pr, what: string, maxFiles: number) {
  const repoPath = `/repos/${target.owner}/${target.repo}`;
  const base = pullPath(target);
  const sha = encodeURIComponent(pr.head.sha);
  const [files, reviews, checks] = await Promise.all([
    section(async () => {
      const items = await pullFiles(api, base, what, maxFiles);
      const total = pr.changed_files ?? items.length;
      return {
        items: items.map((f) => ({
          path: f.filename,
          status: f.status,
          additions: f.additions,
          deletions: f.deletions,
          ...(f.previous_filename ? { previous_path: f.previous_filename } : {}),
        })),
        count: items.length,
        truncated: items.length < total,
      };
    }),
    section(async () =>
      reviewSummary(await api.get(`${base}/reviews?per_page=${PER_PAGE}`, `the reviews of ${what}`)),
    ),
    section(async () =>
      checksSummary(
        await api.get(
          `${repoPath}/commits/${sha}/check-runs?per_page=${PER_PAGE}`,
          `the check runs of ${what}`,
        ),
        await api.get(`${repoPath}/commits/${sha}/status`, `the commit status of ${what}`),
      ),
    ),
  ]);
  return { files, reviews, checks };
}

/** The result: the pull request's own fields, then its sections. */
function pullResult(
  target: Pull,
  pr: Pr,
  sections: Awaited<ReturnType<typeof pullSections>>,
): z.infer<typeof PullResult> {
  const body = capText(pr.body ?? '', BODY_CHARS);
  return {
    url: pr.html_url,
    owner: target.owner,
    repo: target.repo,
    number: pr.number,
    title: pr.title,
    state: pr.merged || pr.merged_at ? 'merged' : pr.state,
    draft: pr.draft ?? false,
    author: pr.user?.login ?? null,
    base: { ref: pr.base.ref, sha: pr.base.sha, repo: pr.base.repo?.full_name ?? null },
    head: { ref: pr.head.ref, sha: pr.head.sha, repo: pr.head.repo?.full_name ?? null },
    body: body.text,
    body_truncated: body.truncated,
    labels: pr.labels.map((l) => l.name),
    requested_reviewers: pr.requested_reviewers.map((r) => r.login),
    mergeable: pr.mergeable ?? null,
    mergeable_state: pr.mergeable_state ?? null,
    stats: {
      commits: pr.commits ?? null,
      additions: pr.additions ?? null,
      deletions: pr.deletions ?? null,
      changed_files: pr.changed_files ?? null,
      comments: pr.comments ?? null,
      review_comments: pr.review_comments ?? null,
    },
    created_at: pr.created_at,
    updated_at: pr.updated_at,
    merged_at: pr.merged_at,
    closed_at: pr.closed_at,
    ...sections,
  };
}

const Ref = z.object({
  ref: z.string(),
  sha: z.string(),
  repo: z.string().nullable().describe('OWNER/REPO'),
});
/** A part of the result that could not be read, in place of that part. */
const PartError = z.object({ error: z.string() });

/** What get_github_pull_request_info returns (pullResult). */
const PullResult = z.object({
  url: z.string(),
  owner: z.string(),
  repo: z.string(),
  number: z.number(),
  title: z.string(),
  state: z.string().describe('open, closed or merged'),
  draft: z.boolean(),
  author: z.string().nullable(),
  base: Ref,
  head: Ref,
  body: z.string(),
  body_truncated: z.boolean(),
  labels: z.array(z.string()),
  requested_reviewers: z.array(z.string()),
  mergeable: z.boolean().nullable(),
  mergeable_state: z.string().nullable(),
  stats: z.object({
    commits: z.number().nullable(),
    additions: z.number().nullable(),
    deletions: z.number().nullable(),
    changed_files: z.number().nullable(),
    comments: z.number().nullable(),
    review_comments: z.number().nullable(),
  }),
  created_at: z.string(),
  updated_at: z.string(),
  merged_at: z.string().nullable(),
  closed_at: z.string().nullable(),
  files: z.union([
    z.object({
      items: z.array(
        z.object({
          path: z.string(),
          status: z.string(),
          additions: z.number(),
          deletions: z.number(),
          previous_path: z.string().optional(),
        }),
      ),
      count: z.number(),
      truncated: z.boolean(),
    }),
    PartError,
  ]),
  reviews: z.union([ReviewSummary, PartError]),
  checks: z.union([ChecksSummary, PartError]),
});

/** A pull request with files, reviews and checks, for reviewing or reporting on it. */
export const getGithubPullRequestInfo = defineTool({
  name: 'get_github_pull_request_info',
  description:
    'Read a GitHub pull request by URL (https://github.com/OWNER/REPO/pull/N) or by owner, repo and number. ' +
    'Returns {url, owner, repo, number, title, state (open, closed or merged), draft, author, base: {ref, sha, ' +
    'repo}, head: {ref, sha, repo}, body, body_truncated, labels, requested_reviewers, mergeable, stats: ' +
    '{commits, additions, deletions, changed_files, comments, review_comments}, created_at, updated_at, ' +
    'merged_at, closed_at, files: {items: [{path, status, additions, deletions, previous_path?}], count, ' +
    'truncated}, reviews: {decision, approved, changes_requested, by_reviewer: [{login, state, submitted_at}]}, ' +
    'checks: {state (success, failure, pending or none), total, passed, failed, pending, skipped, runs}}. ' +
    'files, reviews or checks hold {error} when only that part could not be read. Public repositories work ' +
    'without a token; private ones need GITHUB_TOKEN on the tool-server.',
  input: z.object({
    url: z.string().max(500).optional().describe('The pull request URL; or give owner, repo and number'),
    owner: OwnerName.optional().describe('Repository owner (user or organisation)'),
    repo: RepoName.optional().describe('Repository name'),
    number: z.number().int().min(1).optional().describe('Pull request number'),
    max_files: z
      .number()
      .int()
      .min(1)
      .max(3000)
      .default(300)
      .describe('Most changed files to list (default 300)'),
  }),
  output: PullResult,
  annotations: { title: 'GitHub pull request', ...READ_ONLY, openWorldHint: true },
  async execute(args, ctx: GitToolContext) {
    const api = githubClient(ctx.github);
    const target = pullOf(args, api.apiUrl);
    const what = `pull request ${target.owner}/${target.repo}#${target.number}`;
    const pr = shape(PullRequest, await api.get(pullPath(target), what), what);
    const parts = await pullSections(api, target, pr, what, args.max_files);
    return JSON.parse(api.redact(JSON.stringify(pullResult(target, pr, parts))));
  },
});
