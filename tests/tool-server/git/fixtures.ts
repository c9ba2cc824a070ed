import { execFileSync } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { ToolError } from '../../../tool-server/kit/errors.ts';
import type { GitToolContext } from '../../../tool-server/tools/git/context.ts';
import { gitTools } from '../../../tool-server/tools/git/tools.ts';

// Real temporary repositories for the git tool tests: a HOME of their own (so the developer's global git
// config is never read), repositories with their own user.name/email, and a tool context whose roots
// are a temp directory.

/** A temp world: a root the tools may read, a HOME, and a directory outside the roots. */
export interface GitWorld {
  base: string;
  root: string;
  home: string;
  outside: string;
  env: Record<string, string>;
  ctx: GitToolContext;
  cleanup(): Promise<void>;
}

/** Creates the temp world; `readOnly` makes the root a read-only one. */
export async function gitWorld(
  opts: { readOnly?: boolean; maxOutputBytes?: number; timeoutMs?: number } = {},
) {
  const base = await realpath(await mkdtemp(path.join(tmpdir(), 'git-tools-')));
  const [root, home, outside] = ['root', 'home', 'outside'].map((d) => path.join(base, d));
  for (const d of [root, home, outside]) await mkdir(d, { recursive: true });
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home };
  const paths = await PathGuard.create(
    opts.readOnly ? { roots: [], readOnlyRoots: [root] } : { roots: [root], readOnlyRoots: [] },
  );
  const ctx: GitToolContext = {
    paths,
    maxReadBytes: 256 * 1024,
    git: { env, timeoutMs: opts.timeoutMs ?? 20_000, maxOutputBytes: opts.maxOutputBytes ?? 256 * 1024 },
  };
  const world: GitWorld = {
    base,
    root,
    home,
    outside,
    env,
    ctx,
    cleanup: () => rm(base, { recursive: true, force: true }),
  };
  return world;
}

/** Plain git for building fixtures (and for the control runs that show a hostile config is live). */
export function git(
  world: GitWorld,
  cwd: string,
  args: string[],
  extraEnv: Record<string, string> = {},
): string {
  return execFileSync('git', args, {
    cwd,
    env: {
      ...world.env,
      GIT_AUTHOR_DATE: '2024-01-02T03:04:05Z',
      GIT_COMMITTER_DATE: '2024-01-02T03:04:05Z',
      ...extraEnv,
    },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Like git() but never throws: for control runs whose exit status does not matter. */
export function gitLoose(world: GitWorld, cwd: string, args: string[]): void {
  try {
    git(world, cwd, args);
  } catch {
    // Only its side effects are looked at.
  }
}

/** A new repository at `dir` (created) on branch main, with its own identity in its config. */
export async function initRepo(world: GitWorld, dir: string, opts: { bare?: boolean } = {}): Promise<string> {
  await mkdir(dir, { recursive: true });
  git(world, dir, ['init', '-q', '-b', 'main', ...(opts.bare ? ['--bare'] : [])]);
  // user.name/user.email in the repository's own config (what `git config user.name …` writes), in one write.
  const config = path.join(dir, ...(opts.bare ? [] : ['.git']), 'config');
  await appendFile(config, '[user]\n\tname = Test Author\n\temail = author@example.com\n');
  return dir;
}

/** Writes files (relative to `dir`) and commits them all with `message`; returns the new commit id. */
export async function commit(
  world: GitWorld,
  dir: string,
  files: Record<string, string>,
  message: string,
  date = '2024-01-02T03:04:05Z',
): Promise<string> {
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), content);
  }
  git(world, dir, ['add', '-A']);
  git(world, dir, ['commit', '-q', '-m', message], { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date });
  return git(world, dir, ['rev-parse', 'HEAD']).trim();
}

/** Runs a git tool by name. */
export function runTool(
  world: GitWorld,
  name: string,
  args: unknown,
  ctx: GitToolContext = world.ctx,
): Promise<any> {
  const tool = gitTools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.run(args, ctx);
}

/** Expects the tool to fail with a ToolError whose message matches. */
export async function expectToolError(
  world: GitWorld,
  name: string,
  args: unknown,
  message: RegExp,
  ctx: GitToolContext = world.ctx,
): Promise<string> {
  const err = await runTool(world, name, args, ctx).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  expect((err as Error).message).toMatch(message);
  return (err as Error).message;
}
