import { readFile, rename, symlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createRegistry } from '../../../tool-server/registry.ts';
import { gitTools } from '../../../tool-server/tools/git/tools.ts';
import { commit, expectToolError, type GitWorld, git, gitWorld, initRepo, runTool } from './fixtures.ts';

let w: GitWorld;
let repo: string;

beforeEach(async () => {
  w = await gitWorld();
  repo = await initRepo(w, path.join(w.root, 'project'));
});

afterEach(async () => {
  await w.cleanup();
});

describe('the git_tools set', () => {
  it('toolsets/git_tools.yaml lists exactly the tools served, all read-only', async () => {
    const file = parseYaml(await readFile(path.resolve('toolsets/git_tools.yaml'), 'utf8'));
    const served = createRegistry(gitTools).definitions();
    expect(file).toMatchObject({ id: 'git_tools', backend: 'tool-server' });
    expect(file.tools).toEqual(served.map((d) => d.name));
    expect(file.tools).toEqual([
      'git_status',
      'git_diff',
      'git_log',
      'git_show',
      'git_branches',
      'get_github_pull_request_info',
    ]);
    for (const d of served) {
      expect(d.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
      expect(d.parameters).toMatchObject({ type: 'object' });
    }
    const status = served.find((d) => d.name === 'git_status');
    expect(status?.parameters).toMatchObject({ required: ['repository'] });
  });
});

describe('git_status', () => {
  it('reports a clean repository with its branch and commit', async () => {
    const sha = await commit(w, repo, { 'a.txt': 'one\n' }, 'first');
    const result = await runTool(w, 'git_status', { repository: repo });
    expect(result).toEqual({
      repository: repo,
      branch: { head: 'main', detached: false, oid: sha, upstream: null, ahead: null, behind: null },
      staged: [],
      unstaged: [],
      untracked: [],
      conflicted: [],
      clean: true,
      truncated: false,
    });
  });

  it('groups staged, unstaged, renamed and untracked paths (also from a subdirectory, and names with spaces)', async () => {
    await commit(
      w,
      repo,
      { 'a.txt': 'one\n', 'old name.txt': 'same content\n', 'sub/gone.txt': 'x\n', 'sub/kept.txt': 'k\n' },
      'first',
    );
    await writeFile(path.join(repo, 'a.txt'), 'two\n');
    await writeFile(path.join(repo, 'staged.txt'), 'new\n');
    git(w, repo, ['add', 'staged.txt']);
    git(w, repo, ['mv', 'old name.txt', 'new name.txt']);
    git(w, repo, ['rm', '-q', 'sub/gone.txt']);
    await writeFile(path.join(repo, 'untracked file.txt'), 'u\n');
    const result = await runTool(w, 'git_status', { repository: path.join(repo, 'sub') });
    expect(result.repository).toBe(repo);
    expect(result.clean).toBe(false);
    expect(result.staged).toEqual(
      expect.arrayContaining([
        { path: 'staged.txt', status: 'added' },
        { path: 'new name.txt', status: 'renamed', orig_path: 'old name.txt' },
        { path: 'sub/gone.txt', status: 'deleted' },
      ]),
    );
    expect(result.staged).toHaveLength(3);
    expect(result.unstaged).toEqual([{ path: 'a.txt', status: 'modified' }]);
    expect(result.untracked).toEqual(['untracked file.txt']);
  });

  it('shows a detached HEAD, an upstream with ahead/behind, an empty repository and a conflict', async () => {
    const first = await commit(w, repo, { 'a.txt': 'base\n' }, 'first');
    git(w, repo, ['branch', 'upstream']);
    await commit(w, repo, { 'a.txt': 'ours\n' }, 'ours');
    git(w, repo, ['checkout', '-q', 'upstream']);
    await commit(w, repo, { 'a.txt': 'theirs\n' }, 'theirs');
    git(w, repo, ['checkout', '-q', 'main']);
    git(w, repo, ['branch', '-q', '--set-upstream-to=upstream']);
    const tracking = await runTool(w, 'git_status', { repository: repo });
    expect(tracking.branch).toMatchObject({ head: 'main', upstream: 'upstream', ahead: 1, behind: 1 });

    try {
      git(w, repo, ['merge', '-q', 'upstream']);
    } catch {
      // The conflict is the point.
    }
    const conflict = await runTool(w, 'git_status', { repository: repo });
    expect(conflict.conflicted).toEqual([{ path: 'a.txt', status: 'both_modified' }]);
    git(w, repo, ['merge', '--abort']);

    git(w, repo, ['checkout', '-q', '--detach', first]);
    const detached = await runTool(w, 'git_status', { repository: repo });
    expect(detached.branch).toMatchObject({ head: null, detached: true, oid: first });

    const empty = await initRepo(w, path.join(w.root, 'empty'));
    const fresh = await runTool(w, 'git_status', { repository: empty, untracked: 'no' });
    expect(fresh.branch).toMatchObject({ head: 'main', oid: null });
    expect(fresh.clean).toBe(true);
  });

  it('explains what is wrong with the repository argument', async () => {
    await writeFile(path.join(w.root, 'file.txt'), 'x');
    await expectToolError(
      w,
      'git_status',
      { repository: path.join(w.root, 'file.txt') },
      /is a file; give the repository's directory/,
    );
    await expectToolError(w, 'git_status', { repository: path.join(w.root, 'nope') }, /No such directory/);
    await expectToolError(w, 'git_status', { repository: w.root }, /is not inside a git repository/);
    await expectToolError(w, 'git_status', { repository: w.outside }, /outside the allowed directories/);
    await expectToolError(
      w,
      'git_status',
      { repository: path.join(repo, '.git') },
      /inside a \.git directory/,
    );
    const bare = await initRepo(w, path.join(w.root, 'bare.git'), { bare: true });
    await expectToolError(w, 'git_status', { repository: bare }, /bare repository \(no working tree\)/);
    await expect(runTool(w, 'git_status', {})).rejects.toThrow(/repository: /);
  });
});

describe('git_diff', () => {
  let first: string;
  let second: string;

  beforeEach(async () => {
    first = await commit(
      w,
      repo,
      { 'a.txt': 'one\ntwo\nthree\n', 'b.txt': 'bee\n', 'img.bin': '\0\x01' },
      'first',
    );
    second = await commit(w, repo, { 'a.txt': 'one\n2\nthree\nfour\n', 'c.txt': 'sea\n' }, 'second');
  });

  it('shows unstaged changes as files with line counts and a patch', async () => {
    await writeFile(path.join(repo, 'b.txt'), 'bee\nmore\n');
    const result = await runTool(w, 'git_diff', { repository: repo });
    expect(result.compared).toBe('working tree against the index (unstaged changes)');
    expect(result.files).toEqual([
      { path: 'b.txt', status: 'modified', additions: 1, deletions: 0, binary: false },
    ]);
    expect(result.totals).toEqual({ files: 1, additions: 1, deletions: 0 });
    expect(result.patch).toContain('diff --git a/b.txt b/b.txt');
    expect(result.patch).toContain('+more');
    expect(result.patch_truncated).toBe(false);
  });

  it('shows staged changes, renames and binaries; stat_only leaves out the patch', async () => {
    git(w, repo, ['mv', 'c.txt', 'renamed.txt']);
    await writeFile(path.join(repo, 'img.bin'), '\0\x02\x03');
    git(w, repo, ['add', 'img.bin']);
    const result = await runTool(w, 'git_diff', { repository: repo, staged: true, stat_only: true });
    expect(result.compared).toBe(`index (staged) against HEAD (${second.slice(0, 12)})`);
    expect(result.files).toEqual(
      expect.arrayContaining([
        {
          path: 'renamed.txt',
          old_path: 'c.txt',
          status: 'renamed',
          additions: 0,
          deletions: 0,
          binary: false,
        },
        { path: 'img.bin', status: 'modified', additions: null, deletions: null, binary: true },
      ]),
    );
    expect(result).not.toHaveProperty('patch');
    const unstaged = await runTool(w, 'git_diff', { repository: repo });
    expect(unstaged.files).toEqual([]);
  });

  it('compares two commits or a commit with the working tree, filtered by path', async () => {
    const between = await runTool(w, 'git_diff', {
      repository: repo,
      from: 'HEAD~1',
      to: 'main',
      context_lines: 0,
    });
    expect(between.from).toEqual({ ref: 'HEAD~1', sha: first });
    expect(between.to).toEqual({ ref: 'main', sha: second });
    expect(between.files.map((f: any) => [f.path, f.status, f.additions, f.deletions])).toEqual([
      ['a.txt', 'modified', 2, 1],
      ['c.txt', 'added', 1, 0],
    ]);
    expect(between.patch).toContain('-two\n+2\n');
    const filtered = await runTool(w, 'git_diff', {
      repository: repo,
      from: first,
      to: second,
      paths: ['c.txt'],
    });
    expect(filtered.files.map((f: any) => f.path)).toEqual(['c.txt']);
    await writeFile(path.join(repo, 'c.txt'), 'changed\n');
    const worktree = await runTool(w, 'git_diff', {
      repository: repo,
      from: first,
      paths: [path.join(repo, 'c.txt')],
    });
    expect(worktree.compared).toBe(`working tree against ${first} (${first.slice(0, 12)})`);
    expect(worktree.files).toEqual([
      { path: 'c.txt', status: 'added', additions: 1, deletions: 0, binary: false },
    ]);
  });

  it('works on a bare repository when both commits are given', async () => {
    const bare = path.join(w.root, 'mirror.git');
    git(w, w.root, ['clone', '-q', '--bare', repo, bare]);
    const result = await runTool(w, 'git_diff', {
      repository: bare,
      from: first,
      to: second,
      stat_only: true,
    });
    expect(result.repository).toBe(bare);
    expect(result.totals).toEqual({ files: 2, additions: 3, deletions: 1 });
    await expectToolError(
      w,
      'git_diff',
      { repository: bare },
      /bare repository .* unless both from and to are given/,
    );
  });

  it('refuses contradictory or unknown comparisons with a clear reason', async () => {
    await expectToolError(w, 'git_diff', { repository: repo, to: 'HEAD' }, /`to` needs `from`/);
    await expectToolError(
      w,
      'git_diff',
      { repository: repo, staged: true, from: 'HEAD', to: 'HEAD' },
      /leave out `to`/,
    );
    await expectToolError(
      w,
      'git_diff',
      { repository: repo, from: 'no-such-branch' },
      /from "no-such-branch" does not name a commit/,
    );
    await expectToolError(w, 'git_diff', { repository: repo, from: 'HEAD:a.txt' }, /does not name a commit/);
    await expectToolError(
      w,
      'git_diff',
      { repository: repo, paths: ['../elsewhere'] },
      /outside the repository/,
    );
    await expectToolError(w, 'git_diff', { repository: repo, paths: [w.outside] }, /outside the repository/);
  });

  it('caps a long patch at the output limit with a marker, keeping whole lines', async () => {
    const small = await gitWorld({ maxOutputBytes: 2048 });
    try {
      const r = await initRepo(small, path.join(small.root, 'r'));
      await commit(small, r, { 'big.txt': 'x\n' }, 'one');
      await writeFile(
        path.join(r, 'big.txt'),
        Array.from({ length: 2000 }, (_, i) => `line ${i}\n`).join(''),
      );
      const result = await runTool(small, 'git_diff', { repository: r });
      expect(result.patch_truncated).toBe(true);
      expect(result.files).toEqual([
        { path: 'big.txt', status: 'modified', additions: 2000, deletions: 1, binary: false },
      ]);
      expect(result.patch).toMatch(
        /\n\+line \d+\n\[truncated: the patch is longer than 2048 bytes; ask for fewer paths, or use stat_only\]\n$/,
      );
      expect(Buffer.byteLength(result.patch)).toBeLessThan(2048 + 120);
    } finally {
      await small.cleanup();
    }
  });
});

describe('git_log', () => {
  let shas: string[];

  beforeEach(async () => {
    shas = [];
    shas.push(await commit(w, repo, { 'a.txt': '1\n' }, 'Add a\n\nThe first file.', '2024-01-01T10:00:00Z'));
    git(w, repo, ['config', 'user.name', 'Other Person']);
    git(w, repo, ['config', 'user.email', 'other@example.com']);
    shas.push(await commit(w, repo, { 'b.txt': '1\n' }, 'Add b: fixes bug', '2024-02-01T10:00:00Z'));
    shas.push(await commit(w, repo, { 'a.txt': '2\n' }, 'Change a', '2024-03-01T10:00:00Z'));
  });

  it('lists commits newest first with authors, dates, parents and bodies', async () => {
    const result = await runTool(w, 'git_log', { repository: repo });
    expect(result).toMatchObject({
      ref: 'HEAD',
      sha: shas[2],
      count: 3,
      more_available: false,
      truncated: false,
    });
    expect(result.commits.map((c: any) => c.subject)).toEqual(['Change a', 'Add b: fixes bug', 'Add a']);
    expect(result.commits[2]).toEqual({
      sha: shas[0],
      short_sha: shas[0].slice(0, 7),
      parents: [],
      author: { name: 'Test Author', email: 'author@example.com', date: '2024-01-01T10:00:00+00:00' },
      committer: { name: 'Test Author', email: 'author@example.com', date: '2024-01-01T10:00:00+00:00' },
      subject: 'Add a',
      body: 'The first file.',
    });
    expect(result.commits[0].parents).toEqual([shas[1]]);
  });

  it('pages with limit and skip, and filters by path, author, message and date', async () => {
    const page = await runTool(w, 'git_log', { repository: repo, limit: 1, skip: 1 });
    expect(page.commits.map((c: any) => c.sha)).toEqual([shas[1]]);
    expect(page.more_available).toBe(true);
    const byPath = await runTool(w, 'git_log', { repository: repo, paths: ['a.txt'] });
    expect(byPath.commits.map((c: any) => c.sha)).toEqual([shas[2], shas[0]]);
    const byAuthor = await runTool(w, 'git_log', { repository: repo, author: 'other@' });
    expect(byAuthor.commits.map((c: any) => c.sha)).toEqual([shas[2], shas[1]]);
    const byMessage = await runTool(w, 'git_log', { repository: repo, grep: 'FIXES', ignore_case: true });
    expect(byMessage.commits.map((c: any) => c.sha)).toEqual([shas[1]]);
    const byDate = await runTool(w, 'git_log', {
      repository: repo,
      since: '2024-01-15',
      until: '2024-02-15',
    });
    expect(byDate.commits.map((c: any) => c.sha)).toEqual([shas[1]]);
    const fromRef = await runTool(w, 'git_log', { repository: repo, ref: 'HEAD~2' });
    expect(fromRef.commits.map((c: any) => c.sha)).toEqual([shas[0]]);
  });

  it('explains an unknown ref, an empty repository and bad filters', async () => {
    await expectToolError(
      w,
      'git_log',
      { repository: repo, ref: 'nope' },
      /ref "nope" does not name a commit/,
    );
    const empty = await initRepo(w, path.join(w.root, 'empty'));
    await expectToolError(w, 'git_log', { repository: empty }, /The repository has no commits yet/);
    await expectToolError(
      w,
      'git_log',
      { repository: repo, author: '[' },
      /git log failed: .*Invalid regular expression/,
    );
    await expect(runTool(w, 'git_log', { repository: repo, limit: 0 })).rejects.toThrow(/limit: /);
    await expect(runTool(w, 'git_log', { repository: repo, grep: 'a\nb' })).rejects.toThrow(
      /grep: must not contain control characters/,
    );
  });
});

describe('git_show', () => {
  it('shows one commit with its files and patch against the first parent', async () => {
    const first = await commit(w, repo, { 'a.txt': 'one\n' }, 'first');
    const second = await commit(w, repo, { 'a.txt': 'one\ntwo\n', 'b.txt': 'b\n' }, 'second\n\nWith a body.');
    const result = await runTool(w, 'git_show', { repository: repo, ref: second });
    expect(result.commit).toMatchObject({
      sha: second,
      parents: [first],
      subject: 'second',
      body: 'With a body.',
    });
    expect(result.diff_base).toBe(`first parent ${first}`);
    expect(result.files).toEqual([
      { path: 'a.txt', status: 'modified', additions: 1, deletions: 0, binary: false },
      { path: 'b.txt', status: 'added', additions: 1, deletions: 0, binary: false },
    ]);
    expect(result.patch).toContain('+two');
    const root = await runTool(w, 'git_show', {
      repository: repo,
      ref: 'HEAD~1',
      stat_only: true,
      paths: ['a.txt'],
    });
    expect(root.diff_base).toBe('empty tree (root commit)');
    expect(root.files).toEqual([
      { path: 'a.txt', status: 'added', additions: 1, deletions: 0, binary: false },
    ]);
    expect(root).not.toHaveProperty('patch');
  });

  it('shows a merge against its first parent and refuses what is not a commit', async () => {
    await commit(w, repo, { 'a.txt': 'one\n' }, 'first');
    git(w, repo, ['checkout', '-q', '-b', 'side']);
    await commit(w, repo, { 'side.txt': 's\n' }, 'side');
    git(w, repo, ['checkout', '-q', 'main']);
    const mainTip = await commit(w, repo, { 'main.txt': 'm\n' }, 'main work');
    git(w, repo, ['merge', '-q', '--no-edit', 'side']);
    const merge = await runTool(w, 'git_show', { repository: repo });
    expect(merge.commit.parents).toHaveLength(2);
    expect(merge.diff_base).toBe(`first parent ${mainTip} (a merge of 2 parents)`);
    expect(merge.files.map((f: any) => f.path)).toEqual(['side.txt']);
    git(w, repo, ['tag', 'v1', 'HEAD']);
    expect((await runTool(w, 'git_show', { repository: repo, ref: 'v1' })).commit.sha).toBe(merge.commit.sha);
    await expectToolError(w, 'git_show', { repository: repo, ref: 'HEAD:a.txt' }, /does not name a commit/);
    await expectToolError(w, 'git_show', { repository: repo, ref: '' }, /must be a non-empty string/);
  });
});

describe('git_branches', () => {
  /** A remote named origin (never contacted) whose branches map to refs/remotes/origin/*. */
  const addOrigin = () => {
    git(w, repo, ['config', 'remote.origin.url', 'https://example.invalid/repo.git']);
    git(w, repo, ['config', 'remote.origin.fetch', '+refs/heads/*:refs/remotes/origin/*']);
  };

  it('lists local and remote-tracking branches, newest first, with upstreams', async () => {
    const first = await commit(w, repo, { 'a.txt': '1\n' }, 'first', '2024-01-01T00:00:00Z');
    git(w, repo, ['branch', 'old-feature']);
    const second = await commit(w, repo, { 'a.txt': '2\n' }, 'second', '2024-02-01T00:00:00Z');
    git(w, repo, ['update-ref', 'refs/remotes/origin/main', first]);
    git(w, repo, ['symbolic-ref', 'refs/remotes/origin/HEAD', 'refs/remotes/origin/main']);
    addOrigin();
    git(w, repo, ['config', 'branch.main.remote', 'origin']);
    git(w, repo, ['config', 'branch.main.merge', 'refs/heads/main']);
    const result = await runTool(w, 'git_branches', { repository: repo });
    expect(result).toMatchObject({
      current: 'main',
      detached: false,
      head_sha: second,
      count: 3,
      more_available: false,
    });
    expect(result.branches).toEqual([
      {
        name: 'main',
        sha: second,
        current: true,
        upstream: 'origin/main',
        ahead: 1,
        behind: 0,
        upstream_gone: false,
        last_commit: { date: '2024-02-01T00:00:00+00:00', subject: 'second' },
      },
      {
        name: 'old-feature',
        sha: first,
        current: false,
        upstream: null,
        ahead: null,
        behind: null,
        upstream_gone: false,
        last_commit: { date: '2024-01-01T00:00:00+00:00', subject: 'first' },
      },
    ]);
    expect(result.remote_branches).toEqual([
      {
        name: 'origin/main',
        sha: first,
        last_commit: { date: '2024-01-01T00:00:00+00:00', subject: 'first' },
      },
    ]);
    const local = await runTool(w, 'git_branches', { repository: repo, include_remote: false, limit: 1 });
    expect(local.branches.map((b: any) => b.name)).toEqual(['main']);
    expect(local.remote_branches).toEqual([]);
    expect(local.more_available).toBe(true);
  });

  it('reports a detached HEAD, a gone upstream and an empty repository', async () => {
    const first = await commit(w, repo, { 'a.txt': '1\n' }, 'first');
    addOrigin();
    git(w, repo, ['config', 'branch.main.remote', 'origin']);
    git(w, repo, ['config', 'branch.main.merge', 'refs/heads/vanished']);
    const gone = await runTool(w, 'git_branches', { repository: repo });
    expect(gone.branches[0]).toMatchObject({
      name: 'main',
      upstream: 'origin/vanished',
      upstream_gone: true,
    });
    git(w, repo, ['checkout', '-q', '--detach']);
    const detached = await runTool(w, 'git_branches', { repository: repo });
    expect(detached).toMatchObject({ current: null, detached: true, head_sha: first });
    const empty = await initRepo(w, path.join(w.root, 'empty'));
    expect(await runTool(w, 'git_branches', { repository: empty })).toMatchObject({
      current: 'main',
      head_sha: null,
      branches: [],
      count: 0,
    });
  });
});

describe('repositories and the roots', () => {
  it('works in a read-only root and leaves .git untouched (no index refresh written)', async () => {
    await commit(w, repo, { 'a.txt': 'one\n' }, 'first');
    const ro = await gitWorld({ readOnly: true });
    try {
      await rename(repo, path.join(ro.root, 'project'));
      const moved = path.join(ro.root, 'project');
      // Same content, a later mtime: a stale index entry that `git diff` would refresh and write back.
      await writeFile(path.join(moved, 'a.txt'), 'one\n');
      const later = new Date(Date.now() + 5_000);
      await utimes(path.join(moved, 'a.txt'), later, later);
      const before = await readFile(path.join(moved, '.git', 'index'));
      const status = await runTool(ro, 'git_status', { repository: moved });
      expect(status.clean).toBe(true);
      await runTool(ro, 'git_diff', { repository: moved });
      expect(await readFile(path.join(moved, '.git', 'index'))).toEqual(before);
    } finally {
      await ro.cleanup();
    }
  });

  it('does not find a repository above the roots, nor follow a symlink out of them', async () => {
    const outer = await gitWorld();
    try {
      await initRepo(outer, outer.base); // the roots' parent directory is itself a repository
      await expectToolError(outer, 'git_status', { repository: outer.root }, /not inside a git repository/);
      const elsewhere = await initRepo(outer, path.join(outer.outside, 'secret'));
      await commit(outer, elsewhere, { 's.txt': 'secret\n' }, 'secret');
      await symlink(elsewhere, path.join(outer.root, 'link'));
      await expectToolError(
        outer,
        'git_log',
        { repository: path.join(outer.root, 'link') },
        /outside the allowed directories/,
      );
    } finally {
      await outer.cleanup();
    }
  });
});
