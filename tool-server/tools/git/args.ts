import path from 'node:path';
import { relativeInside } from '../../guards/paths/guard.ts';
import type { ToolContext } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import type { Repo } from './repo.ts';
import { GitFailure } from './run.ts';

// What the model hands git, checked before git sees it: revisions (resolved to commit ids with
// rev-parse --verify, never starting with "-") and path filters (checked by the path guard, passed literally).

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
