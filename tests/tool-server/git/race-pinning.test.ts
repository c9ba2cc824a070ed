import { chown, mkdir, readdir, rename, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import type { GitToolContext } from '../../../tool-server/tools/git/context.ts';
import { GitPins } from '../../../tool-server/tools/git/pin.ts';
import { openRepo, type Repo } from '../../../tool-server/tools/git/repo.ts';
import { commit, expectToolError, type GitWorld, git, gitWorld, initRepo, runTool } from './fixtures.ts';

// The pinning of git_tools, step by step and without timing: a repository is opened (checked), then the
// directory above it is swapped for a symlink to an outside repository of the same shape, and git runs.
// Plain git, given the path, now reads the outside repository; the tools' git reads the one that was
// checked, or refuses where git would look the work tree up by name.

let w: GitWorld;
let repoDir: string;

/** Swaps root/d (holding the repository) for a symlink to the outside directory, or back. */
async function swap(toOutside: boolean): Promise<void> {
  const d = path.join(w.root, 'd');
  const held = path.join(w.root, '.held-d');
  if (toOutside) {
    await rename(d, held);
    await symlink(w.outside, d);
  } else {
    await rename(d, path.join(w.root, '.link'));
    await rename(held, d);
  }
}

beforeEach(async () => {
  w = await gitWorld();
  repoDir = path.join(w.root, 'd', 'repo');
  for (const [dir, mark] of [
    [repoDir, 'inside'],
    [path.join(w.outside, 'repo'), 'OUTSIDE'],
  ]) {
    await initRepo(w, dir);
    await commit(w, dir, { 'a.txt': `${mark} one\n` }, `${mark} first`);
    git(w, dir, ['branch', `${mark}-branch`]);
    await writeFile(path.join(dir, 'a.txt'), `${mark} staged\n`);
    git(w, dir, ['add', 'a.txt']);
  }
});

afterEach(async () => {
  await w.cleanup();
});

describe('git runs on the repository that was checked (Linux, /proc)', () => {
  it.skipIf(process.platform !== 'linux')(
    'a swap after the check changes nothing for commands that need no work tree, and refuses status',
    async () => {
      const repo: Repo = await openRepo(w.ctx, 'd/repo');
      try {
        await swap(true);
        // Control: the path now leads outside, as plain git shows.
        expect(git(w, repoDir, ['log', '-1', '--format=%s'])).toBe('OUTSIDE first\n');

        const log = await repo.run({ sub: 'log', flags: ['--format=%s', '--max-count=1'], revs: ['HEAD'] });
        expect(log.stdout).toBe('inside first\n');
        const refs = await repo.run({ sub: 'for-each-ref', flags: ['--format=%(refname)'] });
        expect(refs.stdout).toContain('refs/heads/inside-branch');
        expect(refs.stdout).not.toContain('OUTSIDE');
        const staged = await repo.run({
          sub: 'diff',
          flags: ['--cached', '--patch', '--no-color', '--no-ext-diff'],
        });
        expect(staged.stdout).toContain('+inside staged');
        // status: git would look the work tree up by its path, which now leads outside.
        await expect(repo.run({ sub: 'status', flags: ['--porcelain=v2'] })).rejects.toThrow(
          /changed while git was reading it .*nothing was returned, try again/,
        );
        await swap(false);
        const status = await repo.run({ sub: 'status', flags: ['--porcelain=v2'] });
        expect(status.stdout).toContain('a.txt');
      } finally {
        await repo.close();
      }
      expect(await runTool(w, 'git_status', { repository: 'd/repo' })).toMatchObject({
        staged: [{ path: 'a.txt', status: 'modified' }],
      });
    },
  );

  it.skipIf(process.platform !== 'linux')(
    'a change above a watched directory during a run discards the answer, and the run is tried once more',
    async () => {
      const pins = await GitPins.open(w.ctx.paths, [repoDir], repoDir);
      try {
        let runs = 0;
        const answer = await pins.run(pins.above(0), async () => {
          runs++;
          return 'kept';
        });
        expect(answer).toBe('kept');
        runs = 0;
        let n = 0;
        // Each run renames an entry of the root (which holds d): the binding of a name above the repository changed.
        await mkdir(path.join(w.root, 'n0'));
        await expect(
          pins.run(pins.above(0), async () => {
            runs++;
            await rename(path.join(w.root, `n${n}`), path.join(w.root, `n${++n}`));
            return 'discarded';
          }),
        ).rejects.toThrow(`${repoDir} changed while git was reading it`);
        expect(runs).toBe(2);
        // A failure during such a run is discarded the same way: its message could come from elsewhere.
        await expect(
          pins.run(pins.above(0), async () => {
            await rename(path.join(w.root, `n${n}`), path.join(w.root, `n${++n}`));
            throw new Error(`git said something about ${w.outside}`);
          }),
        ).rejects.toThrow(/changed while git was reading it/);
      } finally {
        await pins.close();
      }
    },
  );

  it.skipIf(process.platform !== 'linux')(
    'object alternates inside the roots are read through held descriptors',
    async () => {
      const borrower = path.join(w.root, 'borrower');
      git(w, w.root, ['clone', '-q', '--shared', repoDir, borrower]);
      const log = await runTool(w, 'git_log', { repository: 'borrower' });
      expect(log.commits.map((c: { subject: string }) => c.subject)).toEqual(['inside first']);
    },
  );

  it.skipIf(process.getuid?.() !== 0)(
    "a .git file leading to another user's repository outside gets the one answer, not git's ownership refusal",
    async () => {
      const foreign = path.join(w.outside, 'repo', '.git');
      const chownAll = async (dir: string): Promise<void> => {
        await chown(dir, 12345, 12345);
        for (const entry of await readdir(dir, { withFileTypes: true })) {
          const p = path.join(dir, entry.name);
          if (entry.isDirectory()) await chownAll(p);
          else await chown(p, 12345, 12345);
        }
      };
      await chownAll(foreign);
      const linked = path.join(w.root, 'linked');
      await mkdir(linked);
      await writeFile(path.join(linked, '.git'), `gitdir: ${foreign}\n`);
      const message = await expectToolError(
        w,
        'git_status',
        { repository: 'linked' },
        /^Access denied: .*linked is outside the allowed directories/,
      );
      expect(message).not.toContain(w.outside);
    },
  );
});

describe('without /proc (or with descriptors switched off)', () => {
  it('the git tools run on the checked paths as before', async () => {
    const paths = await PathGuard.create({ roots: [w.root], readOnlyRoots: [], verifyDescriptors: false });
    const ctx: GitToolContext = { ...w.ctx, paths };
    expect(paths.raceFree).toBe(false);
    const status = await runTool(w, 'git_status', { repository: 'd/repo' }, ctx);
    expect(status).toMatchObject({ repository: repoDir, staged: [{ path: 'a.txt', status: 'modified' }] });
    const log = await runTool(w, 'git_log', { repository: 'd/repo' }, ctx);
    expect(log.commits[0].subject).toBe('inside first');
    const diff = await runTool(w, 'git_diff', { repository: 'd/repo', staged: true }, ctx);
    expect(diff.patch).toContain('+inside staged');
  });
});
