import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { OutsideRootsError } from '../../guards/paths/guard.ts';
import type { ToolContext } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { type GitCommand, GitFailure, type GitOutput } from './run.ts';

// What a repository names itself, checked before git runs on it: object alternates (each must lie inside
// the roots) and config sections that could start programs (overridden on every call).

/**
 * Config a repository can name itself: sections that can run programs (neutralised per repository), and
 * core.worktree, which makes git look the work tree up by name even for commands that do not need one.
 */
const NAMED_CONFIG = '^(filter|protocol)\\.|^core\\.worktree$';

/** Git looks at most this many alternates deep; so does the containment check. */
const MAX_ALTERNATE_DEPTH = 5;

/**
 * The real path of `dir` (a path git reported). Outside the roots it gets the path guard's one answer for
 * `shown`, the repository as given: where a .git file, core.worktree or alternate points is never named.
 */
export async function insideRoots(ctx: ToolContext, dir: string, shown: string): Promise<string> {
  try {
    return await ctx.paths.resolveForRead(dir);
  } catch (err) {
    if (err instanceof OutsideRootsError) throw ctx.paths.outside(shown);
    throw err;
  }
}

/** What git reads by name inside a git directory and a common directory (beyond the alternates). */
const LAYOUT = [
  'HEAD',
  'index',
  'config',
  'commondir',
  'shallow',
  'packed-refs',
  'refs',
  'logs',
  'info',
  'objects',
  path.join('objects', 'info'),
  path.join('objects', 'pack'),
];

/**
 * The entries git reads by name in the git and common directories must resolve inside the roots: a `.git`
 * whose `objects` or `refs` is a symlink to an outside repository would otherwise be read through.
 * (Links deeper down, a single loose object or ref file, are not looked at.)
 */
export async function checkLayout(ctx: ToolContext, shown: string, dirs: readonly string[]): Promise<void> {
  for (const dir of new Set(dirs)) {
    for (const entry of LAYOUT) await insideRoots(ctx, path.join(dir, entry), shown);
  }
}

/** The alternates file at `file`, or null when there is none. */
async function readAlternates(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ToolError(
      `Refused: the repository's object alternates cannot be read (${(err as Error).message})`,
    );
  }
}

/** An objects directory: its real path (relative alternates resolve against it) and where to read it. */
export interface Objects {
  real: string;
  at: string;
}

/**
 * Every alternate object directory (and theirs, as deep as git goes) must be inside the roots too. Each is
 * handed to `hold`, which says where to read it from: a held descriptor's path, or without /proc the path.
 */
export async function checkAlternates(
  ctx: ToolContext,
  shown: string,
  objects: Objects,
  hold: (real: string) => Promise<string>,
  depth = 0,
): Promise<void> {
  const text = await readAlternates(path.join(objects.at, 'info', 'alternates'));
  if (text === null) return;
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('"')) {
      throw new ToolError('Refused: the repository borrows objects through a quoted alternates entry');
    }
    if (depth >= MAX_ALTERNATE_DEPTH)
      throw new ToolError('Refused: the repository has too many alternates levels');
    const real = await insideRoots(ctx, path.resolve(objects.real, line), shown);
    await checkAlternates(ctx, shown, { real, at: await hold(real) }, hold, depth + 1);
  }
}

/** Overrides for what the repository names, and whether it sets core.worktree. */
export interface NamedConfig {
  overrides: [string, string][];
  coreWorktree: boolean;
}

/** `-c` cannot neutralise a driver whose name holds an `=`, so these go through GIT_CONFIG_KEY_n. */
export async function namedConfig(run: (cmd: GitCommand) => Promise<GitOutput>): Promise<NamedConfig> {
  let listed: string;
  try {
    const out = await run({
      sub: 'config',
      flags: ['--null', '--name-only', '--get-regexp'],
      revs: [NAMED_CONFIG],
    });
    listed = out.stdout;
  } catch (err) {
    if (err instanceof GitFailure && err.exitCode === 1) return { overrides: [], coreWorktree: false };
    throw err;
  }
  const overrides: [string, string][] = [];
  const drivers = new Set<string>();
  const keys = listed.split('\0');
  for (const key of keys) {
    const last = key.lastIndexOf('.');
    if (key.startsWith('filter.') && last > 'filter.'.length) drivers.add(key.slice('filter.'.length, last));
    if (key.startsWith('protocol.') && key.endsWith('.allow')) overrides.push([key, 'never']);
  }
  for (const driver of drivers) {
    for (const field of ['clean', 'smudge', 'process']) overrides.push([`filter.${driver}.${field}`, '']);
    overrides.push([`filter.${driver}.required`, 'false']);
  }
  return { overrides, coreWorktree: keys.includes('core.worktree') };
}
