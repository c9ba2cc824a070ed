import { execFileSync } from 'node:child_process';
import {
  chmod,
  chown,
  lstat,
  mkdir,
  readdir,
  rename,
  rm,
  symlink,
  unlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { gitArgv } from '../../../tool-server/tools/git/run.ts';
import {
  commit,
  expectToolError,
  type GitWorld,
  git,
  gitLoose,
  gitWorld,
  initRepo,
  runTool,
} from './fixtures.ts';

// Attacks on the git tools, each judged by its effect: the file a hostile option, config or hook would
// create does not exist afterwards. Where a plain git run can show that the hostile setup is live (the
// control), it does so first, so a test cannot pass because the trap was never armed.

let w: GitWorld;
let repo: string;
let head: string;

const exists = (p: string) =>
  lstat(p).then(
    () => true,
    () => false,
  );

/** A marker file outside the roots that a hostile program would create. */
const marker = (name: string) => path.join(w.base, `MARK_${name}`);

/** A shell script that creates `mark` and, for textconv-like uses, prints its first argument's file. */
async function hostileScript(name: string, mark: string): Promise<string> {
  const file = path.join(w.base, `${name}.sh`);
  await writeFile(file, `#!/bin/sh\ntouch '${mark}'\n[ -f "$1" ] && cat "$1"\nexit 0\n`);
  await chmod(file, 0o755);
  return file;
}

/** Runs the control (plain git) and checks it creates the marker, then removes it. */
async function armed(mark: string, control: () => void): Promise<void> {
  control();
  expect(await exists(mark), `control run should have created ${mark}`).toBe(true);
  await unlink(mark);
}

/** Makes a tracked file's index entry stale (same content, new mtime), so status/diff must re-read it. */
async function staleStat(file: string, seconds: number): Promise<void> {
  await utimes(file, seconds, seconds);
}

beforeEach(async () => {
  w = await gitWorld();
  repo = await initRepo(w, path.join(w.root, 'project'));
  head = await commit(w, repo, { 'a.txt': 'one\ntwo\n', 'b.txt': 'bee\n' }, 'first');
});

afterEach(async () => {
  await w.cleanup();
});

describe('argument injection', () => {
  it('refuses option-like revisions in every ref argument before git runs', async () => {
    const mark = marker('opt');
    for (const ref of [
      `--output=${mark}`,
      `--upload-pack=touch ${mark}`,
      `-c core.pager=touch ${mark}`,
      `-ccore.fsmonitor=touch ${mark}`,
      '-c',
    ]) {
      await expectToolError(
        w,
        'git_log',
        { repository: repo, ref },
        /starts with "-"; revisions cannot start with a dash/,
      );
      await expectToolError(w, 'git_show', { repository: repo, ref }, /starts with "-"/);
      await expectToolError(w, 'git_diff', { repository: repo, from: ref }, /from .* starts with "-"/);
      await expectToolError(
        w,
        'git_diff',
        { repository: repo, from: 'HEAD', to: ref },
        /to .* starts with "-"/,
      );
    }
    expect(await exists(mark)).toBe(false);
  });

  it('a ref literally named --output=x on disk is listed and usable by its full name, and writes nothing', async () => {
    // The control: for git itself, --output=x is live and writes a file.
    git(w, repo, ['log', '-1', '--output=x']);
    expect(await exists(path.join(repo, 'x'))).toBe(true);
    await unlink(path.join(repo, 'x'));

    await writeFile(path.join(repo, '.git', 'refs', 'heads', '--output=x'), `${head}\n`);
    const branches = await runTool(w, 'git_branches', { repository: repo });
    expect(branches.branches.map((b: any) => b.name).sort()).toEqual(['--output=x', 'main']);
    await expectToolError(
      w,
      'git_log',
      { repository: repo, ref: '--output=x' },
      /starts with "-".*refs\/heads\/<name>/,
    );
    const log = await runTool(w, 'git_log', { repository: repo, ref: 'refs/heads/--output=x' });
    expect(log.commits.map((c: any) => c.sha)).toEqual([head]);
    const show = await runTool(w, 'git_show', {
      repository: repo,
      ref: 'refs/heads/--output=x',
      stat_only: true,
    });
    expect(show.commit.sha).toBe(head);
    const diff = await runTool(w, 'git_diff', {
      repository: repo,
      from: 'refs/heads/--output=x',
      to: 'HEAD',
    });
    expect(diff.files).toEqual([]);
    expect(await exists(path.join(repo, 'x'))).toBe(false);
    expect(await exists(path.resolve('x'))).toBe(false);
  });

  it('option-like text in filters, paths and the repository stays data (-c smuggling)', async () => {
    const mark = marker('smuggle');
    const script = await hostileScript('smuggle', mark);
    const log = await runTool(w, 'git_log', {
      repository: repo,
      author: `x -c core.fsmonitor=${script}`,
      grep: `--upload-pack=${script}`,
    });
    expect(log.commits).toEqual([]);
    const since = await runTool(w, 'git_log', { repository: repo, since: `--output=${mark}` });
    expect(since.count).toBeGreaterThanOrEqual(0);
    const byPath = await runTool(w, 'git_diff', {
      repository: repo,
      from: 'HEAD',
      paths: ['-c', `core.fsmonitor=${script}`, `--output=${mark}`, ':(glob)*'],
    });
    expect(byPath.files).toEqual([]);
    await expectToolError(
      w,
      'git_status',
      { repository: `-c core.fsmonitor=${script}` },
      /No such directory/,
    );
    expect(await exists(mark)).toBe(false);
  });

  it('the runner refuses subcommands and flags that are not on its allow-list, and puts values after --end-of-options', () => {
    expect(() => gitArgv({ cwd: repo }, { sub: 'log', flags: ['--output=x'] })).toThrow(
      /--output=x is not on the allow-list/,
    );
    expect(() => gitArgv({ cwd: repo }, { sub: 'diff', flags: ['--ext-diff'] })).toThrow(
      /not on the allow-list/,
    );
    expect(() => gitArgv({ cwd: repo }, { sub: 'fetch' as any })).toThrow(/not an allowed subcommand/);
    const argv = gitArgv(
      { cwd: repo },
      { sub: 'log', flags: ['--max-count=1'], revs: ['--output=x'], paths: ['-c'] },
    );
    expect(argv.indexOf('--end-of-options')).toBe(argv.indexOf('--output=x') - 1);
    expect(argv.indexOf('--')).toBe(argv.indexOf('-c', argv.indexOf('log')) - 1);
    expect(argv.slice(0, argv.indexOf('log'))).toContain('core.fsmonitor=false');
  });

  it('no GIT_* variable, pager or editor of the service environment reaches git', async () => {
    const mark = marker('env');
    const script = await hostileScript('env', mark);
    const other = await initRepo(w, path.join(w.outside, 'other'));
    await commit(w, other, { 'secret.txt': 'secret\n' }, 'secret');
    const env = {
      ...w.env,
      GIT_EXTERNAL_DIFF: script,
      GIT_PAGER: script,
      PAGER: script,
      GIT_EDITOR: script,
      GIT_SSH_COMMAND: script,
      GIT_CONFIG_PARAMETERS: `'core.fsmonitor'='${script}'`,
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'diff.external',
      GIT_CONFIG_VALUE_0: script,
      GIT_DIR: path.join(other, '.git'),
      GIT_WORK_TREE: other,
      GIT_TRACE: path.join(w.base, 'trace.log'),
    };
    const ctx = { ...w.ctx, git: { ...w.ctx.git, env } };
    await writeFile(path.join(repo, 'a.txt'), 'changed\n');
    const status = await runTool(w, 'git_status', { repository: repo }, ctx);
    expect(status.repository).toBe(repo);
    expect(status.unstaged).toEqual([{ path: 'a.txt', status: 'modified' }]);
    const diff = await runTool(w, 'git_diff', { repository: repo }, ctx);
    expect(diff.patch).toContain('+changed');
    await runTool(w, 'git_log', { repository: repo }, ctx);
    expect(await exists(mark)).toBe(false);
    expect(await exists(path.join(w.base, 'trace.log'))).toBe(false);
  });
});

describe('a hostile repository config runs nothing', () => {
  it('core.fsmonitor', async () => {
    const mark = marker('fsmonitor');
    git(w, repo, ['config', 'core.fsmonitor', await hostileScript('fsmonitor', mark)]);
    await armed(mark, () => gitLoose(w, repo, ['status']));
    await writeFile(path.join(repo, 'a.txt'), 'changed\n');
    await runTool(w, 'git_status', { repository: repo });
    await runTool(w, 'git_diff', { repository: repo });
    expect(await exists(mark)).toBe(false);
  });

  it('core.hooksPath and .git/hooks (post-index-change on an index refresh)', async () => {
    const mark = marker('hook');
    const hooks = path.join(w.base, 'evil-hooks');
    await mkdir(hooks);
    const script = await hostileScript('hook', mark);
    await symlink(script, path.join(hooks, 'post-index-change'));
    await symlink(script, path.join(repo, '.git', 'hooks', 'post-index-change'));
    git(w, repo, ['config', 'core.hooksPath', hooks]);
    await staleStat(path.join(repo, 'a.txt'), 1_000_000_000);
    await armed(mark, () => gitLoose(w, repo, ['status']));
    await staleStat(path.join(repo, 'a.txt'), 1_100_000_000);
    git(w, repo, ['config', '--unset', 'core.hooksPath']);
    await armed(mark, () => gitLoose(w, repo, ['status'])); // .git/hooks is live too
    git(w, repo, ['config', 'core.hooksPath', hooks]);
    await staleStat(path.join(repo, 'a.txt'), 1_200_000_000);
    expect((await runTool(w, 'git_status', { repository: repo })).clean).toBe(true);
    await runTool(w, 'git_diff', { repository: repo });
    expect(await exists(mark)).toBe(false);
  });

  it('core.pager and pager.<command>', async () => {
    const mark = marker('pager');
    const script = await hostileScript('pager', mark);
    for (const key of [
      'core.pager',
      'pager.log',
      'pager.diff',
      'pager.show',
      'pager.status',
      'pager.branch',
    ]) {
      git(w, repo, ['config', key, script]);
    }
    await writeFile(path.join(repo, 'a.txt'), 'changed\n');
    for (const [tool, args] of [
      ['git_log', {}],
      ['git_show', {}],
      ['git_diff', {}],
      ['git_status', {}],
      ['git_branches', {}],
    ] as const) {
      await runTool(w, tool, { repository: repo, ...args });
    }
    expect(await exists(mark)).toBe(false);
  });

  it('diff.external and a diff driver command', async () => {
    const mark = marker('extdiff');
    const script = await hostileScript('extdiff', mark);
    git(w, repo, ['config', 'diff.external', script]);
    await writeFile(path.join(repo, 'a.txt'), 'changed\n');
    await armed(mark, () => gitLoose(w, repo, ['diff']));
    git(w, repo, ['config', '--unset', 'diff.external']);
    git(w, repo, ['config', 'diff.evil.command', script]);
    await writeFile(path.join(repo, '.git', 'info', 'attributes'), '* diff=evil\n');
    await armed(mark, () => gitLoose(w, repo, ['diff']));
    git(w, repo, ['config', 'diff.external', script]);
    const second = await commit(w, repo, { 'b.txt': 'changed too\n' }, 'second');
    await writeFile(path.join(repo, 'a.txt'), 'again\n');
    const diff = await runTool(w, 'git_diff', { repository: repo });
    expect(diff.patch).toContain('diff --git a/a.txt b/a.txt');
    await runTool(w, 'git_diff', { repository: repo, from: head, to: second });
    const show = await runTool(w, 'git_show', { repository: repo });
    expect(show.patch).toContain('+changed too');
    expect(await exists(mark)).toBe(false);
  });

  it('textconv', async () => {
    const mark = marker('textconv');
    git(w, repo, ['config', 'diff.evil.textconv', await hostileScript('textconv', mark)]);
    await commit(w, repo, { '.gitattributes': '*.txt diff=evil\n', 'a.txt': 'changed\n' }, 'second');
    await armed(mark, () => gitLoose(w, repo, ['show', 'HEAD']));
    const show = await runTool(w, 'git_show', { repository: repo });
    expect(show.patch).toContain('-one\n-two\n+changed');
    await runTool(w, 'git_diff', { repository: repo, from: head, to: 'HEAD' });
    await runTool(w, 'git_log', { repository: repo, paths: ['a.txt'] });
    expect(await exists(mark)).toBe(false);
  });

  it('clean, smudge and process filters, also one whose name holds "=" (which -c cannot override)', async () => {
    const mark = marker('filter');
    const script = await hostileScript('filter', mark);
    git(w, repo, ['config', 'filter.evil.clean', `${script} %f`]);
    git(w, repo, ['config', 'filter.evil.smudge', `${script} %f`]);
    git(w, repo, ['config', 'filter.evil.required', 'true']);
    git(w, repo, ['config', 'filter.x=y.clean', `${script} %f`]);
    git(w, repo, ['config', 'filter.proc.process', script]);
    await writeFile(path.join(repo, 'a.txt'), 'changed\n');
    for (const driver of ['evil', 'x=y', 'proc']) {
      await writeFile(path.join(repo, '.git', 'info', 'attributes'), `* filter=${driver}\n`);
      await armed(mark, () => gitLoose(w, repo, ['diff']));
    }
    // -c splits at the first "=", so it cannot reach a driver named x=y: the control proves the need.
    await writeFile(path.join(repo, '.git', 'info', 'attributes'), '* filter=x=y\n');
    await armed(mark, () => gitLoose(w, repo, ['-c', 'filter.x=y.clean=', 'diff']));
    for (const driver of ['evil', 'x=y', 'proc']) {
      await writeFile(path.join(repo, '.git', 'info', 'attributes'), `* filter=${driver}\n`);
      await staleStat(path.join(repo, 'b.txt'), 1_000_000_000);
      const status = await runTool(w, 'git_status', { repository: repo });
      expect(status.unstaged).toEqual([{ path: 'a.txt', status: 'modified' }]);
      const diff = await runTool(w, 'git_diff', { repository: repo });
      expect(diff.patch).toContain('+changed');
    }
    expect(await exists(mark)).toBe(false);
  });

  it("a submodule's own config (a filter the superproject does not name)", async () => {
    const mark = marker('submodule');
    const sub = await initRepo(w, path.join(repo, 'sub'));
    const subHead = await commit(w, sub, { 'f.txt': 'one\n' }, 'sub');
    git(w, sub, ['config', 'filter.subevil.clean', `${await hostileScript('submodule', mark)} %f`]);
    await writeFile(path.join(sub, '.git', 'info', 'attributes'), '* filter=subevil\n');
    git(w, repo, ['add', 'sub']); // a gitlink: sub is a submodule of the superproject
    git(w, repo, ['commit', '-q', '-m', 'add sub']);
    await writeFile(path.join(sub, 'f.txt'), 'two\n');
    await armed(mark, () => gitLoose(w, repo, ['status']));
    await armed(mark, () => gitLoose(w, repo, ['diff']));
    expect((await runTool(w, 'git_status', { repository: repo })).clean).toBe(true);
    await runTool(w, 'git_diff', { repository: repo });
    await runTool(w, 'git_diff', { repository: repo, from: head });
    expect(await exists(mark)).toBe(false);
    // A new commit in the submodule is still reported: only its work tree is not looked into.
    const moved = await commit(w, sub, { 'g.txt': 'g\n' }, 'sub 2');
    await rm(mark, { force: true }); // plain git add in the fixture ran the filter; the tools must not
    const status = await runTool(w, 'git_status', { repository: repo });
    expect(status.unstaged).toEqual([{ path: 'sub', status: 'modified' }]);
    const diff = await runTool(w, 'git_diff', { repository: repo });
    expect(diff.patch).toContain(`-Subproject commit ${subHead}\n+Subproject commit ${moved}`);
    expect(await exists(mark)).toBe(false);
  });

  it('log.showSignature with a hostile gpg.program', async () => {
    const mark = marker('gpg');
    git(w, repo, ['config', 'gpg.program', await hostileScript('gpg', mark)]);
    git(w, repo, ['config', 'log.showSignature', 'true']);
    const tree = git(w, repo, ['rev-parse', 'HEAD^{tree}']).trim();
    const signed = execFileSync('git', ['hash-object', '-t', 'commit', '-w', '--stdin'], {
      cwd: repo,
      env: w.env,
      input:
        `tree ${tree}\nparent ${head}\nauthor A <a@example.com> 1700000000 +0000\n` +
        'committer A <a@example.com> 1700000000 +0000\n' +
        'gpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\nsigned\n',
      encoding: 'utf8',
    }).trim();
    git(w, repo, ['update-ref', 'refs/heads/main', signed]);
    await armed(mark, () => gitLoose(w, repo, ['log', '-1']));
    expect((await runTool(w, 'git_log', { repository: repo })).commits[0].subject).toBe('signed');
    await runTool(w, 'git_show', { repository: repo });
    expect(await exists(mark)).toBe(false);
  });

  it('a partial clone whose missing objects would be fetched through ext::, ssh or upload-pack', async () => {
    const mark = marker('fetch');
    const script = await hostileScript('fetch', mark);
    const second = await commit(w, repo, { 'a.txt': 'secret\n' }, 'second');
    const blob = git(w, repo, ['rev-parse', `${second}:a.txt`]).trim();
    await rm(path.join(repo, '.git', 'objects', blob.slice(0, 2), blob.slice(2)));
    git(w, repo, ['config', 'core.repositoryformatversion', '1']);
    git(w, repo, ['config', 'extensions.partialClone', 'origin']);
    git(w, repo, ['config', 'remote.origin.promisor', 'true']);
    const variants: [string, string][][] = [
      [
        ['remote.origin.url', `ext::sh -c ${script}`],
        ['protocol.ext.allow', 'always'],
      ],
      [
        ['remote.origin.url', 'ssh://example.invalid/repo.git'],
        ['core.sshCommand', script],
        ['protocol.ssh.allow', 'always'],
      ],
      [
        ['remote.origin.url', path.join(w.root, 'elsewhere')],
        ['remote.origin.uploadpack', script],
      ],
    ];
    for (const config of variants) {
      for (const [key, value] of config) git(w, repo, ['config', key, value]);
      await armed(mark, () => gitLoose(w, repo, ['show', second]));
      await expectToolError(w, 'git_show', { repository: repo, ref: second }, /git diff failed/);
      await expectToolError(w, 'git_diff', { repository: repo, from: head, to: second }, /git diff failed/);
      expect(await exists(mark)).toBe(false);
      for (const [key] of config) git(w, repo, ['config', '--unset-all', key]);
    }
  });

  it('an include of a FIFO that never opens is stopped by the timeout', async () => {
    const slow = await gitWorld({ timeoutMs: 400 });
    try {
      const r = await initRepo(slow, path.join(slow.root, 'r'));
      const fifo = path.join(slow.base, 'never.fifo');
      execFileSync('mkfifo', [fifo]);
      git(slow, r, ['config', 'include.path', fifo]);
      await expectToolError(
        slow,
        'git_status',
        { repository: r },
        /did not finish within 400 ms and was stopped/,
      );
    } finally {
      await slow.cleanup();
    }
  });
});

describe('a repository must lie inside the roots', () => {
  it('refuses a core.worktree, a .git file or object alternates that point outside, naming none of them', async () => {
    // The path guard's one answer for the repository as given: where the repository leads is never named.
    const refusal = (dir: string) =>
      new RegExp(
        `^Access denied: ${dir} is outside the allowed directories \\(read-write: ${w.root}; read-only: none\\)$`,
      );
    git(w, repo, ['config', 'core.worktree', w.outside]);
    await expectToolError(w, 'git_status', { repository: repo }, refusal(repo));
    git(w, repo, ['config', '--unset', 'core.worktree']);

    const external = await initRepo(w, path.join(w.outside, 'ext'));
    await commit(w, external, { 's.txt': 'secret\n' }, 'secret');
    const linked = path.join(w.root, 'linked');
    await mkdir(linked);
    await writeFile(path.join(linked, '.git'), `gitdir: ${path.join(external, '.git')}\n`);
    await expectToolError(w, 'git_log', { repository: linked }, refusal(linked));

    await writeFile(
      path.join(repo, '.git', 'objects', 'info', 'alternates'),
      `${path.join(external, '.git', 'objects')}\n`,
    );
    const secret = git(w, external, ['rev-parse', 'HEAD']).trim();
    await expectToolError(w, 'git_show', { repository: repo, ref: secret }, refusal(repo));
    await writeFile(path.join(repo, '.git', 'objects', 'info', 'alternates'), '"/quoted/path"\n');
    await expectToolError(w, 'git_log', { repository: repo }, /quoted alternates entry/);
  });

  it('refuses a git directory whose objects or refs lead outside, naming neither', async () => {
    const external = await initRepo(w, path.join(w.outside, 'ext'));
    const secret = await commit(w, external, { 's.txt': 'secret\n' }, 'secret');
    for (const entry of ['objects', 'refs']) {
      const at = path.join(repo, '.git', entry);
      await rename(at, `${at}-real`);
      await symlink(path.join(external, '.git', entry), at);
      const message = await expectToolError(
        w,
        'git_show',
        { repository: repo, ref: secret },
        new RegExp(`^Access denied: ${repo} is outside the allowed directories`),
      );
      expect(message).not.toContain(w.outside);
      await rm(at);
      await rename(`${at}-real`, at);
    }
    expect((await runTool(w, 'git_log', { repository: repo })).count).toBe(1);
  });

  it('refuses a path filter that leaves the roots through a symlink', async () => {
    await symlink(w.outside, path.join(repo, 'out'));
    await expectToolError(
      w,
      'git_log',
      { repository: repo, paths: ['out/file'] },
      /outside the allowed directories/,
    );
    const inside = await runTool(w, 'git_log', { repository: repo, paths: ['a.txt'] });
    expect(inside.count).toBe(1);
  });

  it.skipIf(process.getuid?.() !== 0)(
    "keeps git's safe.directory check for a repository owned by another user, and says how to trust it",
    async () => {
      const mark = marker('owned');
      const owned = await initRepo(w, path.join(w.root, 'owned'));
      git(w, owned, ['config', 'core.fsmonitor', await hostileScript('owned', mark)]);
      const chownAll = async (dir: string): Promise<void> => {
        await chown(dir, 12345, 12345);
        for (const entry of await readdir(dir, { withFileTypes: true })) {
          const p = path.join(dir, entry.name);
          if (entry.isDirectory()) await chownAll(p);
          else await chown(p, 12345, 12345);
        }
      };
      await chownAll(owned);
      await expectToolError(
        w,
        'git_status',
        { repository: owned },
        /owned by another user \(git's safe\.directory check, which toolshift keeps\).*git config --global --add safe\.directory/,
      );
      await writeFile(path.join(w.home, '.gitconfig'), `[safe]\n\tdirectory = ${owned}\n`);
      expect((await runTool(w, 'git_status', { repository: owned })).clean).toBe(true);
      expect(await exists(mark)).toBe(false);
    },
  );
});
