import { z } from 'zod';
import { defineTool, READ_ONLY } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { hasCommits, hasControlCharacter, pathspecs, resolveCommit } from './args.ts';
import type { GitToolContext } from './context.ts';
import { CommitInfo, capText, LOG_FORMAT, parseLog, parseRefs, REF_FORMAT } from './parse.ts';
import { contextArg, DiffBody, diffBody, pathsArg, repositoryArg } from './read.ts';
import { type Repo, withRepo } from './repo.ts';
import { GitFailure, gitLimits } from './run.ts';

// The git tools that read history: git_log, git_show (one commit with its patch) and git_branches.

/** Empty trees, by object id length (SHA-1, SHA-256): what a root commit is compared with. */
const EMPTY_TREE: Record<number, string> = {
  40: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
  64: '6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321',
};

/** Longest commit body git_log returns per commit; git_show returns up to the output cap. */
const LOG_BODY_CHARS = 2000;

/** A free-text log filter: one argv element (`--author=<text>`), so it can never become an option. */
const filterText = (what: string) =>
  z
    .string()
    .min(1)
    .max(200)
    .refine((text) => !hasControlCharacter(text), 'must not contain control characters')
    .optional()
    .describe(what);

/** One commit's metadata by id. */
async function commitInfo(repo: Repo, sha: string): Promise<CommitInfo> {
  const out = await repo.run({
    sub: 'log',
    flags: [LOG_FORMAT, '-z', '--max-count=1', '--no-patch'],
    revs: [sha],
  });
  const [commit] = parseLog(out.stdout, out.truncated);
  if (!commit)
    throw new ToolError(`Commit ${sha} could not be read (its message is larger than the output cap)`);
  return commit;
}

/** Commits, newest first, filtered by path, author, message, and date. */
export const gitLog = defineTool({
  name: 'git_log',
  description:
    'List commits of a git repository, newest first, starting from `ref` (default HEAD). Filters: paths, ' +
    'author (name or email, a regular expression), grep (commit message, a regular expression), since/until ' +
    '(dates like 2024-01-31 or "2 weeks ago"). Returns {repository, ref, sha, commits: [{sha, short_sha, ' +
    'parents, author: {name, email, date}, committer, subject, body}], count, more_available, truncated}; ' +
    'use skip to page. Bodies longer than 2000 characters are cut with a marker.',
  input: z.object({
    repository: repositoryArg,
    ref: z
      .string()
      .default('HEAD')
      .describe('Where to start: branch, tag, commit id, HEAD~2 … (default HEAD)'),
    limit: z
      .number()
      .int()
      .min(1)
      .max(200)
      .default(20)
      .describe('Most commits to return (1-200, default 20)'),
    skip: z.number().int().min(0).max(1_000_000).default(0).describe('Commits to skip first, for paging'),
    paths: pathsArg,
    author: filterText('Only commits whose author name or email matches this regular expression'),
    grep: filterText('Only commits whose message matches this regular expression'),
    since: filterText('Only commits after this date'),
    until: filterText('Only commits before this date'),
    ignore_case: z.boolean().default(false).describe('Match author and grep case-insensitively'),
  }),
  output: z.object({
    repository: z.string(),
    ref: z.string(),
    sha: z.string().describe('The commit `ref` resolved to'),
    commits: z.array(CommitInfo),
    count: z.number(),
    more_available: z.boolean().describe('More commits follow: page on with skip'),
    truncated: z.boolean(),
  }),
  annotations: { title: 'Git log', ...READ_ONLY },
  execute: (args, ctx: GitToolContext) =>
    withRepo(ctx, args.repository, async (repo) => {
      const sha = await resolveCommit(repo, args.ref, 'ref');
      const paths = await pathspecs(ctx, repo, args.paths ?? []);
      const flags = [LOG_FORMAT, '-z', '--no-patch', `--max-count=${args.limit + 1}`, `--skip=${args.skip}`];
      if (args.author !== undefined) flags.push(`--author=${args.author}`);
      if (args.grep !== undefined) flags.push(`--grep=${args.grep}`);
      if (args.since !== undefined) flags.push(`--since=${args.since}`);
      if (args.until !== undefined) flags.push(`--until=${args.until}`);
      if (args.ignore_case) flags.push('--regexp-ignore-case');
      const out = await repo.run({
        sub: 'log',
        flags,
        revs: [sha],
        paths: paths.length > 0 ? paths : undefined,
      });
      const all = parseLog(out.stdout, out.truncated);
      const commits = all
        .slice(0, args.limit)
        .map((c) => ({ ...c, body: capText(c.body, LOG_BODY_CHARS).text }));
      return {
        repository: repo.workTree ?? repo.gitDir,
        ref: args.ref,
        sha,
        commits,
        count: commits.length,
        more_available: all.length > args.limit || out.truncated,
        truncated: out.truncated,
      };
    }),
});

/** One commit: metadata, changed files, and its patch against the first parent. */
export const gitShow = defineTool({
  name: 'git_show',
  description:
    'Show one commit of a git repository: {repository, ref, commit: {sha, short_sha, parents, author, ' +
    'committer, subject, body}, diff_base, files: [{path, old_path?, status, additions, deletions, binary}], ' +
    'totals, files_truncated, patch, patch_truncated}. The diff is against the first parent (a root commit ' +
    'against an empty tree); stat_only leaves out the patch; a patch over the output cap ends with a ' +
    '"[truncated: …]" line.',
  input: z.object({
    repository: repositoryArg,
    ref: z.string().default('HEAD').describe('The commit: branch, tag, commit id, HEAD~2 … (default HEAD)'),
    paths: pathsArg,
    stat_only: z.boolean().default(false).describe('Only the file list and line counts, no patch'),
    context_lines: contextArg,
  }),
  output: DiffBody.extend({
    repository: z.string(),
    ref: z.string(),
    commit: CommitInfo,
    diff_base: z.string().describe('What the diff is against, in words'),
  }),
  annotations: { title: 'Git show', ...READ_ONLY },
  execute: (args, ctx: GitToolContext) =>
    withRepo(ctx, args.repository, async (repo) => {
      const sha = await resolveCommit(repo, args.ref, 'ref');
      const paths = await pathspecs(ctx, repo, args.paths ?? []);
      const commit = await commitInfo(repo, sha);
      const parent = commit.parents[0];
      const base = parent ?? EMPTY_TREE[sha.length];
      if (!base) throw new ToolError(`Unsupported object id length for ${sha}`);
      const body = await diffBody(
        repo,
        { flags: [], revs: [base, sha], paths },
        { statOnly: args.stat_only, context: args.context_lines },
      );
      const maxBody = gitLimits(repo.settings).maxOutputBytes;
      return {
        repository: repo.workTree ?? repo.gitDir,
        ref: args.ref,
        commit: { ...commit, body: capText(commit.body, maxBody).text },
        diff_base: parent
          ? `first parent ${parent}${commit.parents.length > 1 ? ` (a merge of ${commit.parents.length} parents)` : ''}`
          : 'empty tree (root commit)',
        ...body,
      };
    }),
});

/** The current branch name, or null when HEAD is detached. */
async function currentBranch(repo: Repo): Promise<string | null> {
  try {
    const out = await repo.run({ sub: 'symbolic-ref', flags: ['--quiet', '--short'], revs: ['HEAD'] });
    return out.stdout.trim();
  } catch (err) {
    if (err instanceof GitFailure && err.exitCode === 1) return null;
    throw err;
  }
}

const LastCommit = z.object({ date: z.string().describe('ISO 8601'), subject: z.string() });

/** Local and remote-tracking branches with their upstreams and last commits. */
export const gitBranches = defineTool({
  name: 'git_branches',
  description:
    'List the branches of a git repository, most recently committed first. Returns {repository, current ' +
    '(null when HEAD is detached), detached, head_sha, branches: [{name, sha, current, upstream, ahead, behind, ' +
    'upstream_gone, last_commit: {date, subject}}], remote_branches: [{name, sha, last_commit}], count, ' +
    'more_available}.',
  input: z.object({
    repository: repositoryArg,
    include_remote: z.boolean().default(true).describe('Also list remote-tracking branches (refs/remotes)'),
    limit: z.number().int().min(1).max(1000).default(200).describe('Most branches to return (default 200)'),
  }),
  output: z.object({
    repository: z.string(),
    current: z.string().nullable().describe('null when HEAD is detached'),
    detached: z.boolean(),
    head_sha: z.string().nullable().describe('null before the first commit'),
    branches: z.array(
      z.object({
        name: z.string(),
        sha: z.string(),
        current: z.boolean(),
        upstream: z.string().nullable(),
        ahead: z.number().nullable(),
        behind: z.number().nullable(),
        upstream_gone: z.boolean(),
        last_commit: LastCommit,
      }),
    ),
    remote_branches: z.array(z.object({ name: z.string(), sha: z.string(), last_commit: LastCommit })),
    count: z.number(),
    more_available: z.boolean(),
  }),
  annotations: { title: 'Git branches', ...READ_ONLY },
  execute: (args, ctx: GitToolContext) =>
    withRepo(ctx, args.repository, async (repo) => {
      const out = await repo.run({
        sub: 'for-each-ref',
        flags: [REF_FORMAT, '--sort=-committerdate', `--count=${args.limit + 1}`],
        revs: args.include_remote ? ['refs/heads', 'refs/remotes'] : ['refs/heads'],
      });
      const refs = parseRefs(out.stdout, out.truncated).filter((r) => r.symref === null);
      const shown = refs.slice(0, args.limit);
      const current = await currentBranch(repo);
      const headSha = (await hasCommits(repo)) ? await resolveCommit(repo, 'HEAD', 'HEAD') : null;
      const lastCommit = (r: (typeof refs)[number]) => ({ date: r.date, subject: r.subject });
      return {
        repository: repo.workTree ?? repo.gitDir,
        current,
        detached: current === null,
        head_sha: headSha,
        branches: shown
          .filter((r) => r.refname.startsWith('refs/heads/'))
          .map((r) => ({
            name: r.refname.slice('refs/heads/'.length),
            sha: r.sha,
            current: r.current,
            upstream: r.upstream,
            ahead: r.ahead,
            behind: r.behind,
            upstream_gone: r.upstream_gone,
            last_commit: lastCommit(r),
          })),
        remote_branches: shown
          .filter((r) => r.refname.startsWith('refs/remotes/'))
          .map((r) => ({
            name: r.refname.slice('refs/remotes/'.length),
            sha: r.sha,
            last_commit: lastCommit(r),
          })),
        count: shown.length,
        more_available: refs.length > args.limit || out.truncated,
      };
    }),
});
