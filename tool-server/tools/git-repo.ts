import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { relativeInside } from '../path-guard.ts';
import { type ToolContext, ToolError } from './define.ts';
import {
  type GitCommand,
  GitFailure,
  type GitOutput,
  type GitSettings,
  type GitTarget,
  runGit,
} from './git-run.ts';

// Opening a repository for the git tools: found from a directory under the roots, never above them, with
// its work tree, git directory, common directory and object alternates all inside the roots, then pinned
// (--git-dir/--work-tree) so its config cannot move them. Revisions and pathspecs are checked here.

/** A repository that passed the checks; every git call for a tool goes through `run`. */
export interface Repo {
  /** The top of the work tree, or null for a bare repository. */
  workTree: string | null;
  gitDir: string;
  run(cmd: GitCommand, opts?: { maxBytes?: number }): Promise<GitOutput>;
  /** The effective git settings of this call (limits, environment). */
  settings: GitSettings | undefined;
}

/** Config sections a repository can name itself and that can run programs: neutralised per repository. */
const NAMED_CONFIG = '^(filter|protocol)\\.';

/** Git looks at most this many alternates deep; so does the containment check. */
const MAX_ALTERNATE_DEPTH = 5;

/** The real path of `dir`, or a ToolError saying which part of the repository leaves the roots. */
async function insideRoots(ctx: ToolContext, dir: string, what: string): Promise<string> {
  try {
    return await ctx.paths.resolveForRead(dir);
  } catch (err) {
    if (!(err instanceof ToolError)) throw err;
    throw new ToolError(`Refused: the repository's ${what} ${dir} is not inside the allowed directories`);
  }
}

/** The parent of the root holding `real`: discovery may look at the root itself but not above it. */
function ceilingFor(ctx: ToolContext, real: string): string | undefined {
  const { read_write, read_only } = ctx.paths.allowed();
  const holding = [...read_write, ...read_only]
    .filter((root) => relativeInside(root, real) !== null)
    .sort((a, b) => b.length - a.length)[0];
  return holding ? path.dirname(holding) : undefined;
}

/** Every alternate object directory (and theirs, as deep as git goes) must be inside the roots too. */
async function checkAlternates(ctx: ToolContext, objectsDir: string, depth = 0): Promise<void> {
  let text: string;
  try {
    text = await readFile(path.join(objectsDir, 'info', 'alternates'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new ToolError(
      `Refused: the repository's object alternates cannot be read (${(err as Error).message})`,
    );
  }
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('"')) {
      throw new ToolError('Refused: the repository borrows objects through a quoted alternates entry');
    }
    if (depth >= MAX_ALTERNATE_DEPTH)
      throw new ToolError('Refused: the repository has too many alternates levels');
    const real = await insideRoots(ctx, path.resolve(objectsDir, line), 'object alternate');
    await checkAlternates(ctx, real, depth + 1);
  }
}

/** `-c` cannot neutralise a driver whose name holds an `=`, so these go through GIT_CONFIG_KEY_n. */
async function namedOverrides(
  target: GitTarget,
  settings: GitSettings | undefined,
): Promise<[string, string][]> {
  let listed: string;
  try {
    const out = await runGit(
      target,
      { sub: 'config', flags: ['--null', '--name-only', '--get-regexp'], revs: [NAMED_CONFIG] },
      settings,
    );
    listed = out.stdout;
  } catch (err) {
    if (err instanceof GitFailure && err.exitCode === 1) return []; // nothing matched
    throw err;
  }
  const overrides: [string, string][] = [];
  const drivers = new Set<string>();
  for (const key of listed.split('\0')) {
    const last = key.lastIndexOf('.');
    if (key.startsWith('filter.') && last > 'filter.'.length) drivers.add(key.slice('filter.'.length, last));
    if (key.startsWith('protocol.') && key.endsWith('.allow')) overrides.push([key, 'never']);
  }
  for (const driver of drivers) {
    for (const field of ['clean', 'smudge', 'process']) overrides.push([`filter.${driver}.${field}`, '']);
    overrides.push([`filter.${driver}.required`, 'false']);
  }
  return overrides;
}

const LOCATE = ['--path-format=absolute', '--absolute-git-dir', '--git-common-dir', '--is-bare-repository'];

/**
 * git dir, common dir, bare?, inside the work tree?, and the work tree's top: one rev-parse, or two when
 * there is no work tree (--show-toplevel fails there).
 */
async function discover(
  target: GitTarget,
  settings: GitSettings | undefined,
  real: string,
): Promise<string[]> {
  try {
    const out = await runGit(
      target,
      { sub: 'rev-parse', flags: [...LOCATE, '--is-inside-work-tree', '--show-toplevel'] },
      settings,
    );
    return out.stdout.replace(/\n$/, '').split('\n');
  } catch (err) {
    if (!(err instanceof GitFailure)) throw err;
    if (/not a git repository/i.test(err.stderr)) {
      throw new ToolError(
        `${real} is not inside a git repository (repositories above the allowed directories are not searched)`,
      );
    }
    if (!/must be run in a work tree/.test(err.stderr)) throw err;
  }
  const out = await runGit(
    target,
    { sub: 'rev-parse', flags: [...LOCATE, '--is-inside-work-tree'] },
    settings,
  );
  return out.stdout.replace(/\n$/, '').split('\n');
}

/** Opens the repository holding `dir` (a path under the roots), or explains why it cannot. */
export async function openRepo(ctx: ToolContext, dir: string): Promise<Repo> {
  const real = await ctx.paths.resolveForRead(dir);
  const info = await stat(real).catch(() => null);
  if (!info) throw new ToolError(`No such directory: ${real}`);
  if (!info.isDirectory()) throw new ToolError(`${real} is a file; give the repository's directory`);
  const settings = ctx.git;
  const discovery: GitTarget = { cwd: real, ceiling: ceilingFor(ctx, real) };
  const [gitDirRaw, commonDirRaw, bare, , top] = await discover(discovery, settings, real);
  if (bare !== 'true' && !top) {
    throw new ToolError(`${real} is inside a .git directory; give the repository's working directory`);
  }
  const workTree = bare === 'true' ? null : await insideRoots(ctx, top, 'work tree');
  const gitDir = await insideRoots(ctx, gitDirRaw, 'git directory');
  const commonDir = await insideRoots(ctx, commonDirRaw, 'common git directory');
  await checkAlternates(ctx, path.join(commonDir, 'objects'));
  const pinned: GitTarget = { cwd: workTree ?? gitDir, gitDir, workTree: workTree ?? undefined };
  const target: GitTarget = { ...pinned, config: await namedOverrides(pinned, settings) };
  return {
    workTree,
    gitDir,
    settings,
    run: (cmd, opts) => runGit(target, cmd, settings, opts),
  };
}

/** True when `text` holds a C0 control character or DEL: never part of a ref, a date or a search text. */
export function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** Refuses what can never be a revision argument, before git sees it. */
function checkRevisionText(ref: unknown, label: string): string {
  if (typeof ref !== 'string' || ref.trim() === '')
    throw new ToolError(`${label} must be a non-empty string`);
  if (ref.startsWith('-')) {
    throw new ToolError(
      `${label} ${JSON.stringify(ref)} starts with "-"; revisions cannot start with a dash ` +
        '(use the full name, e.g. refs/heads/<name>, for a branch whose name starts with one)',
    );
  }
  if (hasControlCharacter(ref)) throw new ToolError(`${label} contains a control character`);
  if (ref.length > 256) throw new ToolError(`${label} is longer than 256 characters`);
  return ref;
}

/** The commit id `ref` names (branch, tag, id, HEAD~2 …), checked with rev-parse --verify. */
export async function resolveCommit(repo: Repo, ref: string, label: string): Promise<string> {
  checkRevisionText(ref, label);
  try {
    const out = await repo.run({
      sub: 'rev-parse',
      flags: ['--verify', '--quiet'],
      revs: [`${ref}^{commit}`],
    });
    return out.stdout.trim();
  } catch (err) {
    if (!(err instanceof GitFailure) || err.exitCode === null) throw err;
    if (ref === 'HEAD' && !(await hasCommits(repo))) {
      throw new ToolError('The repository has no commits yet');
    }
    throw new ToolError(
      `${label} ${JSON.stringify(ref)} does not name a commit in this repository; ` +
        'give a branch, tag, commit id or an expression like HEAD~2 (git_branches lists the branches)',
    );
  }
}

/** False for a repository whose current branch has no commit yet. */
export async function hasCommits(repo: Repo): Promise<boolean> {
  try {
    await repo.run({ sub: 'rev-parse', flags: ['--verify', '--quiet'], revs: ['HEAD^{commit}'] });
    return true;
  } catch (err) {
    if (err instanceof GitFailure && err.exitCode !== null) return false;
    throw err;
  }
}

/**
 * Pathspecs relative to the work tree, each checked by the path guard (it must stay inside the roots as
 * it really is, symlinks resolved) and lexically inside the repository. They are passed literally.
 */
export async function pathspecs(ctx: ToolContext, repo: Repo, paths: readonly string[]): Promise<string[]> {
  const specs: string[] = [];
  for (const p of paths) {
    if (typeof p !== 'string' || p.trim() === '')
      throw new ToolError('A path filter must be a non-empty string');
    if (p.includes('\0')) throw new ToolError('A path filter contains a NUL byte');
    if (repo.workTree === null) {
      const norm = path.posix.normalize(p);
      if (path.posix.isAbsolute(norm) || norm === '..' || norm.startsWith('../')) {
        throw new ToolError(`The path filter ${JSON.stringify(p)} must be relative to the repository's top`);
      }
      specs.push(norm);
      continue;
    }
    const abs = path.resolve(repo.workTree, p);
    const rel = relativeInside(repo.workTree, abs);
    if (rel === null) {
      throw new ToolError(`The path filter ${abs} is outside the repository ${repo.workTree}`);
    }
    await ctx.paths.resolveForRead(abs);
    specs.push(rel === '' ? '.' : rel.split(path.sep).join('/'));
  }
  return specs;
}
