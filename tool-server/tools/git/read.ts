import { z } from 'zod';
import { defineTool, READ_ONLY } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { hasCommits, pathspecs, resolveCommit } from './args.ts';
import type { GitToolContext } from './context.ts';
import { DiffFile, DiffTotals, diffTotals, ParsedStatus, parseDiffFiles, parseStatus } from './parse.ts';
import { type Repo, withRepo } from './repo.ts';
import { gitLimits } from './run.ts';

// The git tools that look at the working state: git_status, and git_diff (also used by git_show).

/** The repository argument every git tool takes. */
export const repositoryArg = z
  .string()
  .describe(
    "The repository's directory (or any directory inside it): absolute, or relative to the first allowed directory",
  );

/** A path filter: paths inside the repository, relative to its top directory (or absolute). */
export const pathsArg = z
  .array(z.string())
  .max(100)
  .optional()
  .describe("Only these files or directories (relative to the repository's top directory, or absolute)");

/** Lines of context around each change in a patch. */
export const contextArg = z
  .number()
  .int()
  .min(0)
  .max(50)
  .default(3)
  .describe('Lines of context around each change in the patch (default 3)');

/**
 * On every diff: git's own diff only, and submodules judged by their recorded commit. Looking into a
 * submodule's work tree would run git there under the submodule's own config (its filters, unnamed here).
 */
const DIFF_SAFETY = ['--no-color', '--no-ext-diff', '--no-textconv', '--ignore-submodules=dirty'];

/** A patch cut at the last whole line within the cap, with a marker saying it was cut. */
function cappedPatch(stdout: string, truncated: boolean, cap: number): string {
  if (!truncated) return stdout;
  const cut = stdout.lastIndexOf('\n');
  const kept = cut === -1 ? '' : stdout.slice(0, cut + 1);
  return `${kept}[truncated: the patch is longer than ${cap} bytes; ask for fewer paths, or use stat_only]\n`;
}

/** What a diff returns after its framing: the files with line counts, totals, and the capped patch. */
export const DiffBody = z.object({
  files: z.array(DiffFile),
  totals: DiffTotals,
  files_truncated: z.boolean(),
  patch: z.string().optional().describe('Unified patch; absent with stat_only'),
  patch_truncated: z.boolean().optional(),
});
export type DiffBody = z.infer<typeof DiffBody>;

/** Runs the file summary and (unless stat_only) the patch of one `git diff` comparison. */
export async function diffBody(
  repo: Repo,
  compare: { flags: string[]; revs?: string[]; paths: string[] },
  opts: { statOnly: boolean; context: number },
): Promise<DiffBody> {
  const paths = compare.paths.length > 0 ? compare.paths : undefined;
  const summary = await repo.run({
    sub: 'diff',
    flags: [...compare.flags, ...DIFF_SAFETY, '--raw', '--numstat', '-z', '-M'],
    revs: compare.revs,
    paths,
  });
  const files = parseDiffFiles(summary.stdout, summary.truncated);
  const body: DiffBody = { files, totals: diffTotals(files), files_truncated: summary.truncated };
  if (opts.statOnly) return body;
  const patch = await repo.run({
    sub: 'diff',
    flags: [...compare.flags, ...DIFF_SAFETY, '--patch', '-M', `--unified=${opts.context}`],
    revs: compare.revs,
    paths,
  });
  const cap = gitLimits(repo.settings).maxOutputBytes;
  return {
    ...body,
    patch: cappedPatch(patch.stdout, patch.truncated, cap),
    patch_truncated: patch.truncated,
  };
}

/** A commit the call named, as given and as resolved. */
const Rev = z.object({ ref: z.string().optional(), sha: z.string() });

/** Refuses a bare repository for tools that need a working tree. */
function assertWorkTree(repo: Repo, tool: string): asserts repo is Repo & { workTree: string } {
  if (repo.workTree === null) {
    throw new ToolError(
      `${repo.gitDir} is a bare repository (no working tree); ${tool} needs one` +
        (tool === 'git_diff' ? ' unless both from and to are given' : ''),
    );
  }
}

/** The state of the working tree and index, grouped the way a person reads `git status`. */
export const gitStatus = defineTool({
  name: 'git_status',
  description:
    'Show the working-tree status of a git repository under the allowed directories. Returns {repository, ' +
    'branch: {head (null when detached), detached, oid, upstream, ahead, behind}, staged: [{path, status, ' +
    'orig_path?}], unstaged: [{path, status}], untracked: [path], conflicted: [{path, status}], clean, truncated}. ' +
    'status is one of added, modified, deleted, renamed, copied, type_changed; a conflict is e.g. both_modified.',
  input: z.object({
    repository: repositoryArg,
    untracked: z
      .enum(['no', 'normal', 'all'])
      .default('normal')
      .describe('Untracked files: no, normal (a new directory shown once) or all (every file)'),
  }),
  output: ParsedStatus.extend({
    repository: z.string().describe("The repository's working tree"),
    clean: z.boolean(),
    truncated: z.boolean(),
  }),
  annotations: { title: 'Git status', ...READ_ONLY },
  execute: (args, ctx: GitToolContext) =>
    withRepo(ctx, args.repository, async (repo) => {
      assertWorkTree(repo, 'git_status');
      const out = await repo.run({
        sub: 'status',
        flags: [
          '--porcelain=v2',
          '--branch',
          '-z',
          `--untracked-files=${args.untracked}`,
          '--ignore-submodules=dirty',
        ],
      });
      const status = parseStatus(out.stdout, out.truncated);
      const clean =
        !out.truncated &&
        status.staged.length + status.unstaged.length + status.untracked.length + status.conflicted.length ===
          0;
      return { repository: repo.workTree, ...status, clean, truncated: out.truncated };
    }),
});

/** Changes as a file list with line counts and a capped unified patch. */
export const gitDiff = defineTool({
  name: 'git_diff',
  description:
    'Show changes in a git repository: by default the working tree against the index (unstaged changes); ' +
    'staged: true for the index against HEAD (or `from`); `from` alone for the working tree against that ' +
    'commit; `from` and `to` for two commits (branches, tags, ids, HEAD~2 …). Untracked files are not part ' +
    'of a diff (git_status lists them). Returns {repository, compared, from?, to?, files: [{path, old_path?, ' +
    'status, additions, deletions, binary}], totals, files_truncated, patch, patch_truncated}; stat_only ' +
    'leaves out the patch. A patch over the output cap ends with a "[truncated: …]" line.',
  input: z.object({
    repository: repositoryArg,
    staged: z.boolean().default(false).describe('Compare the index (staged changes) with HEAD or `from`'),
    from: z.string().optional().describe('Base commit of the comparison'),
    to: z.string().optional().describe('Second commit; needs `from`'),
    paths: pathsArg,
    stat_only: z.boolean().default(false).describe('Only the file list and line counts, no patch'),
    context_lines: contextArg,
  }),
  output: DiffBody.extend({
    repository: z.string(),
    compared: z.string().describe('What was compared with what, in words'),
    from: Rev.optional(),
    to: Rev.optional(),
  }),
  annotations: { title: 'Git diff', ...READ_ONLY },
  async execute(args, ctx: GitToolContext) {
    if (args.to !== undefined && args.from === undefined) {
      throw new ToolError('`to` needs `from`: give both to compare two commits');
    }
    if (args.staged && args.to !== undefined) {
      throw new ToolError('staged compares the index with one commit (`from`, default HEAD); leave out `to`');
    }
    return withRepo(ctx, args.repository, async (repo) => {
      if (args.to === undefined) assertWorkTree(repo, 'git_diff');
      const from = args.from === undefined ? undefined : await resolveCommit(repo, args.from, 'from');
      const to = args.to === undefined ? undefined : await resolveCommit(repo, args.to, 'to');
      const paths = await pathspecs(ctx, repo, args.paths ?? []);
      let compared: string;
      let flags: string[] = [];
      let revs: string[] | undefined;
      if (from && to) {
        compared = `${args.from} (${from.slice(0, 12)}) → ${args.to} (${to.slice(0, 12)})`;
        revs = [from, to];
      } else if (args.staged) {
        flags = ['--cached'];
        const base =
          from ?? ((await hasCommits(repo)) ? await resolveCommit(repo, 'HEAD', 'HEAD') : undefined);
        revs = base ? [base] : undefined;
        compared = `index (staged) against ${base ? `${args.from ?? 'HEAD'} (${base.slice(0, 12)})` : 'an empty tree (no commits yet)'}`;
      } else if (from) {
        compared = `working tree against ${args.from} (${from.slice(0, 12)})`;
        revs = [from];
      } else {
        compared = 'working tree against the index (unstaged changes)';
      }
      const body = await diffBody(
        repo,
        { flags, revs, paths },
        { statOnly: args.stat_only, context: args.context_lines },
      );
      return {
        repository: repo.workTree ?? repo.gitDir,
        compared,
        ...(from ? { from: { ref: args.from, sha: from } } : {}),
        ...(to ? { to: { ref: args.to, sha: to } } : {}),
        ...body,
      };
    });
  },
});
