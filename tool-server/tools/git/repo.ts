import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { VerifiedDir } from '../../guards/paths/fd-path.ts';
import { relativeInside } from '../../guards/paths/guard.ts';
import { ToolError } from '../../kit/errors.ts';
import type { GitToolContext } from './context.ts';
import { checkAlternates, checkLayout, insideRoots, namedConfig } from './named.ts';
import { changedWhileReading, GitPins, slotPath } from './pin.ts';
import { type GitCommand, GitFailure, type GitOutput, type GitSettings, type GitTarget } from './run.ts';
import { runGit } from './spawn.ts';

// Opening a repository for the git tools: found from a directory under the roots, never above them, with
// its work tree, git directory, common directory and object alternates all inside the roots; then git is
// pinned to what was checked. With /proc (pin.ts) it gets those directories as open descriptors and
// their paths are watched where git still looks names up; elsewhere it gets --git-dir/--work-tree paths.

/** A repository that passed the checks; every git call for a tool goes through `run`, and `close` ends it. */
export interface Repo {
  /** The top of the work tree, or null for a bare repository. */
  workTree: string | null;
  gitDir: string;
  run(cmd: GitCommand, opts?: { maxBytes?: number }): Promise<GitOutput>;
  /** The effective git settings of this call (limits, environment). */
  settings: GitSettings | undefined;
  close(): Promise<void>;
}

/** The parent of the root holding `real`: discovery may look at the root itself but not above it. */
function ceilingFor(ctx: GitToolContext, real: string): string | undefined {
  const { read_write, read_only } = ctx.paths.allowed();
  const holding = [...read_write, ...read_only]
    .filter((root) => relativeInside(root, real) !== null)
    .sort((a, b) => b.length - a.length)[0];
  return holding ? path.dirname(holding) : undefined;
}

const LOCATE = ['--path-format=absolute', '--absolute-git-dir', '--git-common-dir', '--is-bare-repository'];

/** Where discovery found the repository, every part checked to be inside the roots. */
interface Located {
  workTree: string | null;
  gitDir: string;
  commonDir: string;
}

/**
 * Before git's ownership refusal is passed on: the repository it names, and where that one's .git file leads,
 * must be inside the roots, or the owner of something outside would be told. Anything else gets the one answer.
 */
async function assertOwnershipInside(ctx: GitToolContext, reported: string, shown: string): Promise<void> {
  const top = await insideRoots(ctx, reported, shown);
  let text: string;
  try {
    text = await readFile(await insideRoots(ctx, path.join(top, '.git'), shown), 'utf8');
  } catch (err) {
    if (err instanceof ToolError) throw err;
    return; // a .git directory (EISDIR), or none (the repository is bare): nothing leads elsewhere
  }
  const target = /^gitdir: (.+)$/m.exec(text)?.[1];
  if (target) await insideRoots(ctx, path.resolve(top, target.trim()), shown);
}

/**
 * git dir, common dir, bare?, inside the work tree?, and the work tree's top: one rev-parse, or two when
 * there is no work tree (--show-toplevel fails there). Each path must lie inside the roots.
 */
async function discover(
  ctx: GitToolContext,
  run: (cmd: GitCommand) => Promise<GitOutput>,
  real: string,
  shown: string,
): Promise<Located> {
  let lines: string[] | undefined;
  try {
    const out = await run({
      sub: 'rev-parse',
      flags: [...LOCATE, '--is-inside-work-tree', '--show-toplevel'],
    });
    lines = out.stdout.replace(/\n$/, '').split('\n');
  } catch (err) {
    if (!(err instanceof GitFailure)) throw err;
    if (/not a git repository/i.test(err.stderr)) {
      throw new ToolError(
        `${real} is not inside a git repository (repositories above the allowed directories are not searched)`,
      );
    }
    const dubious = /detected dubious ownership in repository at '([^']*)'/.exec(err.stderr);
    if (dubious) await assertOwnershipInside(ctx, dubious[1], shown);
    if (!/must be run in a work tree/.test(err.stderr)) throw err;
  }
  lines ??= (await run({ sub: 'rev-parse', flags: [...LOCATE, '--is-inside-work-tree'] })).stdout
    .replace(/\n$/, '')
    .split('\n');
  const [gitDirRaw, commonDirRaw, bare, , top] = lines;
  if (bare !== 'true' && !top) {
    throw new ToolError(`${real} is inside a .git directory; give the repository's working directory`);
  }
  return {
    workTree: bare === 'true' ? null : await insideRoots(ctx, top, shown),
    gitDir: await insideRoots(ctx, gitDirRaw, shown),
    commonDir: await insideRoots(ctx, commonDirRaw, shown),
  };
}

/** status, and a diff that involves the working tree: git looks the work tree up by its path for these. */
function readsWorkTree(cmd: GitCommand): boolean {
  if (cmd.sub === 'status') return true;
  return cmd.sub === 'diff' && !(cmd.flags ?? []).includes('--cached') && (cmd.revs?.length ?? 0) < 2;
}

/** Directories without repeats (chains of one repository share their upper part). */
function distinct(dirs: VerifiedDir[]): VerifiedDir[] {
  const seen = new Map<string, VerifiedDir>();
  for (const d of dirs) if (!seen.has(d.real)) seen.set(d.real, d);
  return [...seen.values()];
}

/** The repository through descriptors (Linux): see pin.ts. */
async function openPinned(ctx: GitToolContext, real: string, shown: string): Promise<Repo> {
  const settings = ctx.git;
  // Discovery looks names up from `real` upwards: `real` and everything above it is watched meanwhile.
  const start = await GitPins.open(ctx.paths, [real], shown);
  let located: Located;
  try {
    const target: GitTarget = { cwd: slotPath(0), ceiling: ceilingFor(ctx, real), fds: start.fds };
    const watched = start.above(0, true);
    located = await discover(
      ctx,
      (cmd) => start.run(watched, () => runGit(target, cmd, settings)),
      real,
      shown,
    );
  } finally {
    await start.close();
  }
  const { workTree, gitDir, commonDir } = located;
  // Slots: 0 where git runs (the work tree, or the git directory of a bare repository), 1 the git directory,
  // 2 the common directory, then the alternates.
  const pins = await GitPins.open(ctx.paths, [workTree ?? gitDir, gitDir, commonDir], shown);
  try {
    await checkLayout(ctx, shown, [gitDir, commonDir]);
    const alternates: number[] = [];
    const objects = { real: path.join(commonDir, 'objects'), at: path.join(pins.selfPath(2), 'objects') };
    await checkAlternates(ctx, shown, objects, async (alternate) => {
      const slot = await pins.add(ctx.paths, alternate);
      alternates.push(slot);
      return pins.selfPath(slot);
    });
    // git reads alternates by the names in the file: the directories above them are watched on every run.
    const byName = alternates.flatMap((slot) => pins.above(slot));
    const base: GitTarget = {
      cwd: slotPath(0),
      gitDir: slotPath(1),
      commonDir: commonDir === gitDir ? undefined : slotPath(2),
      fds: pins.fds,
    };
    const named = await namedConfig((cmd) =>
      pins.run(distinct(byName), () => runGit({ ...base, noWorkTree: true }, cmd, settings)),
    );
    // core.worktree makes git look the work tree up by name for every command: then it is watched always.
    const always = distinct([...byName, ...(named.coreWorktree && workTree ? pins.above(0) : [])]);
    const withWorkTree = distinct([...always, ...(workTree ? pins.above(0) : [])]);
    return {
      workTree,
      gitDir,
      settings,
      run: (cmd, opts) => {
        const reads = workTree !== null && readsWorkTree(cmd);
        const target: GitTarget = {
          ...base,
          config: named.overrides,
          ...(reads ? { workTree: slotPath(0) } : { noWorkTree: true }),
        };
        return pins.run(reads ? withWorkTree : always, () => runGit(target, cmd, settings, opts));
      },
      close: () => pins.close(),
    };
  } catch (err) {
    await pins.close();
    throw err;
  }
}

/** The repository by its paths (no /proc): the same checks, with nothing held between them and git's use. */
async function openByPath(ctx: GitToolContext, real: string, shown: string): Promise<Repo> {
  const settings = ctx.git;
  const discovery: GitTarget = { cwd: real, ceiling: ceilingFor(ctx, real) };
  const { workTree, gitDir, commonDir } = await discover(
    ctx,
    (cmd) => runGit(discovery, cmd, settings),
    real,
    shown,
  );
  const objects = path.join(commonDir, 'objects');
  await checkLayout(ctx, shown, [gitDir, commonDir]);
  await checkAlternates(ctx, shown, { real: objects, at: objects }, async (alternate) => alternate);
  const pinned: GitTarget = { cwd: workTree ?? gitDir, gitDir, workTree: workTree ?? undefined };
  const named = await namedConfig((cmd) => runGit(pinned, cmd, settings));
  const target: GitTarget = { ...pinned, config: named.overrides };
  return {
    workTree,
    gitDir,
    settings,
    run: (cmd, opts) => runGit(target, cmd, settings, opts),
    close: async () => undefined,
  };
}

/** Opens the repository holding `dir` (a path under the roots), or explains why it cannot; close it after. */
export async function openRepo(ctx: GitToolContext, dir: string): Promise<Repo> {
  const shown = ctx.paths.absolute(dir);
  const real = await ctx.paths.resolveForRead(dir);
  const info = await ctx.paths.lstatEntry(real).catch((err: unknown) => {
    if (err instanceof ToolError) throw err;
    return null;
  });
  if (!info) throw new ToolError(`No such directory: ${real}`);
  if (info.isSymbolicLink()) throw changedWhileReading(shown); // realpath()'d a moment ago: swapped since
  if (!info.isDirectory()) throw new ToolError(`${real} is a file; give the repository's directory`);
  return ctx.paths.raceFree ? openPinned(ctx, real, shown) : openByPath(ctx, real, shown);
}

/** Runs `fn` with the opened repository and lets its descriptors go afterwards, whatever happens. */
export async function withRepo<T>(
  ctx: GitToolContext,
  dir: string,
  fn: (repo: Repo) => Promise<T>,
): Promise<T> {
  const repo = await openRepo(ctx, dir);
  try {
    return await fn(repo);
  } finally {
    await repo.close();
  }
}
