import { mkdir, mkdtemp, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_BLOCKED_PATTERNS,
  PathGuard,
  relativeInside,
} from '../../../tool-server/guards/paths/guard.ts';
import { ToolError } from '../../../tool-server/kit/errors.ts';

let base: string;
let root: string;
let outside: string;
let guard: PathGuard;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'path-guard-')));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'secret');
  guard = await PathGuard.create({ roots: [root], readOnlyRoots: [] });
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function denied(promise: Promise<unknown>, message: RegExp | string = /Access denied/) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  if (typeof message === 'string') expect((err as Error).message).toBe(message);
  else expect((err as Error).message).toMatch(message);
}

describe('PathGuard.create', () => {
  it('creates a missing read-write root and reports real paths', async () => {
    expect((await stat(root)).isDirectory()).toBe(true);
    expect(guard.allowed()).toEqual({ read_write: [root], read_only: [] });
    expect(guard.isRoot(root)).toBe(true);
    expect(guard.isRoot(path.join(root, 'x'))).toBe(false);
  });

  it('refuses a missing read-only root and an empty root list', async () => {
    await expect(PathGuard.create({ roots: [], readOnlyRoots: [path.join(base, 'nope')] })).rejects.toThrow(
      /Read-only root .*nope does not exist/,
    );
    await expect(PathGuard.create({ roots: [], readOnlyRoots: [] })).rejects.toThrow(/at least one root/);
  });

  it('realpaths a root given through a symlink, and accepts paths in either spelling', async () => {
    const alias = path.join(base, 'alias');
    await symlink(root, alias);
    const g = await PathGuard.create({ roots: [alias], readOnlyRoots: [] });
    expect(g.allowed().read_write).toEqual([root]);
    expect(await g.resolveForWrite(path.join(alias, 'a.txt'))).toBe(path.join(root, 'a.txt'));
    expect(await g.resolveForWrite(path.join(root, 'a.txt'))).toBe(path.join(root, 'a.txt'));
  });

  it('exports the default blocked patterns', () => {
    expect(DEFAULT_BLOCKED_PATTERNS).toContain('**/.git/**');
    expect(DEFAULT_BLOCKED_PATTERNS).toContain('**/.env*');
  });
});

describe('containment', () => {
  it('refuses a sibling whose name starts with the root name, naming the allowed directories', async () => {
    const sibling = path.join(base, 'root2', 'file.txt');
    await mkdir(path.dirname(sibling));
    await writeFile(sibling, 'x');
    const message = `Access denied: ${sibling} is outside the allowed directories (read-write: ${root}; read-only: none)`;
    await denied(guard.resolveForRead(sibling), message);
    await denied(guard.resolveForWrite(sibling), message);
    await denied(guard.resolveForRead(path.join(base, 'root2')));
  });

  it('refuses .. traversal, relative and absolute', async () => {
    await denied(guard.resolveForRead('../outside/secret.txt'), /is outside the allowed directories/);
    await denied(guard.resolveForRead(`${root}/../outside/secret.txt`), /is outside/);
    await denied(guard.resolveForWrite('sub/../../outside/new.txt'), /is outside/);
    await denied(guard.resolveForRead('..'), /is outside/);
    await denied(guard.resolveForRead('/etc/passwd'), /Access denied: \/etc\/passwd is outside/);
    expect(await guard.resolveForRead('sub/../a.txt')).toBe(path.join(root, 'a.txt'));
  });

  it('allows a name that merely starts with two dots', async () => {
    expect(await guard.resolveForWrite('..foo')).toBe(path.join(root, '..foo'));
    expect(await guard.resolveForWrite('sub/..bar/x')).toBe(path.join(root, 'sub/..bar/x'));
  });

  it('resolves relative paths against the first read-write root', async () => {
    const ro = path.join(base, 'ro');
    await mkdir(ro);
    const g = await PathGuard.create({ roots: [root], readOnlyRoots: [ro] });
    expect(await g.resolveForRead('a/b.txt')).toBe(path.join(root, 'a/b.txt'));
    expect(await g.resolveForRead('.')).toBe(root);
    const readOnly = await PathGuard.create({ roots: [], readOnlyRoots: [ro] });
    expect(await readOnly.resolveForRead('b.txt')).toBe(path.join(ro, 'b.txt'));
  });

  it('expands ~ and ~/ to the home directory, then checks it like any path', async () => {
    const home = path.join(root, 'home');
    const g = await PathGuard.create({ roots: [root], readOnlyRoots: [], homeDir: home });
    expect(await g.resolveForWrite('~/notes.txt')).toBe(path.join(home, 'notes.txt'));
    expect(await g.resolveForRead('~')).toBe(home);
    // ~user and a ~ inside a name are names, as on the shell.
    expect(await g.resolveForWrite('~other/x')).toBe(path.join(root, '~other/x'));
    expect(await g.resolveForWrite('a/~/x')).toBe(path.join(root, 'a/~/x'));
    const outsideHome = await PathGuard.create({ roots: [root], readOnlyRoots: [], homeDir: outside });
    await denied(
      outsideHome.resolveForRead('~/secret.txt'),
      `Access denied: ${path.join(outside, 'secret.txt')} is outside the allowed directories (read-write: ${root}; read-only: none)`,
    );
    await denied(outsideHome.resolveForWrite('~/new.txt'), /is outside the allowed directories/);
  });

  it('refuses Windows-style paths with a message saying which paths work', async () => {
    for (const p of ['C:\\Users\\me\\a.txt', 'c:/Users/me', 'D:', '\\\\server\\share\\x']) {
      await denied(guard.resolveForRead(p), /is a Windows path; this server takes POSIX paths/);
      await denied(guard.resolveForWrite(p), /is a Windows path/);
    }
    // A colon or a backslash inside a POSIX name is still a name.
    expect(await guard.resolveForWrite('notes:v2.txt')).toBe(path.join(root, 'notes:v2.txt'));
    expect(await guard.resolveForWrite('a\\b.txt')).toBe(path.join(root, 'a\\b.txt'));
  });

  it('refuses empty strings, non-strings and NUL bytes', async () => {
    await denied(guard.resolveForRead(''), /non-empty string/);
    await denied(guard.resolveForRead(42 as unknown as string), /non-empty string/);
    await denied(guard.resolveForRead('a\0b'), /NUL byte/);
    await denied(guard.resolveForWrite(`${root}/x\0/../../etc/passwd`), /NUL byte/);
  });
});

describe('symlinks', () => {
  it('refuses to read through a symlink that points outside, without saying where it points', async () => {
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link'));
    await denied(
      guard.resolveForRead('link'),
      `Access denied: ${path.join(root, 'link')} is outside the allowed directories (read-write: ${root}; read-only: none)`,
    );
  });

  it('refuses to write to an existing symlink that points outside', async () => {
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link'));
    await denied(guard.resolveForWrite('link'), /is outside the allowed directories/);
  });

  it('refuses a new file under a symlinked directory that points outside, at any depth', async () => {
    await symlink(outside, path.join(root, 'linkdir'));
    await denied(guard.resolveForWrite('linkdir/new.txt'), /is outside/);
    await denied(guard.resolveForWrite('linkdir/a/b/new.txt'), /is outside/);
    await denied(guard.resolveForRead('linkdir/secret.txt'), /is outside/);
  });

  it('refuses a dangling symlink inside, and paths beneath it; an outward one is simply outside', async () => {
    await symlink(path.join(root, 'not-yet'), path.join(root, 'dangling-in'));
    await symlink('not-yet/deeper', path.join(root, 'dangling-rel'));
    const dangling = `Access denied: ${path.join(root, 'dangling-in')} is a symbolic link whose target does not exist; it cannot be used`;
    await denied(guard.resolveForWrite('dangling-in'), dangling);
    await denied(guard.resolveForRead('dangling-in'), dangling);
    await denied(guard.resolveForWrite('dangling-in/x.txt'), dangling);
    await denied(
      guard.resolveForWrite('dangling-rel'),
      /dangling-rel is a symbolic link whose target does not/,
    );
    await symlink(path.join(outside, 'missing.txt'), path.join(root, 'dangling'));
    await denied(guard.resolveForWrite('dangling'), /dangling is outside the allowed directories/);
    await denied(
      guard.resolveForRead('dangling/x.txt'),
      /dangling\/x\.txt is outside the allowed directories/,
    );
  });

  it('refuses a symlink loop instead of falling back (only ENOENT gets the fallback)', async () => {
    await symlink(path.join(root, 'loop2'), path.join(root, 'loop1'));
    await symlink(path.join(root, 'loop1'), path.join(root, 'loop2'));
    await denied(
      guard.resolveForRead('loop1'),
      /cannot be resolved safely: too many levels of symbolic links/,
    );
    await denied(guard.resolveForWrite('loop1/x'), /cannot be resolved safely/);
  });

  it('follows a symlink that stays inside and returns its real target', async () => {
    await writeFile(path.join(root, 'target.txt'), 't');
    await symlink(path.join(root, 'target.txt'), path.join(root, 'alias.txt'));
    expect(await guard.resolveForRead('alias.txt')).toBe(path.join(root, 'target.txt'));
    expect(await guard.resolveForWrite('alias.txt')).toBe(path.join(root, 'target.txt'));
  });

  it('refuses when a path component is a file', async () => {
    await writeFile(path.join(root, 'file'), 'x');
    await denied(guard.resolveForWrite('file/child'), /a component of the path is a file/);
  });
});

describe('blocked patterns', () => {
  const cases: [string, string][] = [
    ['.git', '**/.git/**'],
    ['.git/config', '**/.git/**'],
    ['sub/.git/hooks/pre-commit', '**/.git/**'],
    ['node_modules/pkg/index.js', '**/node_modules/**'],
    ['app/node_modules', '**/node_modules/**'],
    ['.env', '**/.env*'],
    ['config/.env.local', '**/.env*'],
    ['.ENV.production', '**/.env*'],
    ['.envrc', '**/.env*'],
    ['.env_local', '**/.env*'],
    ['.git-credentials', '**/.git-credentials'],
    ['.pgpass', '**/.pgpass'],
    ['id_rsa', '**/id_rsa*'],
    ['keys/id_rsa.pub', '**/id_rsa*'],
    ['.ssh/config', '**/.ssh/**'],
    ['certs/server.pem', '**/*.pem'],
    ['credentials-prod.json', '**/credentials*.json'],
    ['secrets.yaml', '**/secrets.yaml'],
  ];

  it.each(cases)('refuses writing %s and names %s', async (p, pattern) => {
    await denied(
      guard.resolveForWrite(p),
      `Access denied: ${path.join(root, p)} matches the protected pattern "${pattern}"; files like this (version control, dependencies, keys and secrets) cannot be modified`,
    );
  });

  it('still allows reading them, and writing look-alikes', async () => {
    expect(await guard.resolveForRead('.env')).toBe(path.join(root, '.env'));
    expect(await guard.resolveForRead('.git/config')).toBe(path.join(root, '.git/config'));
    for (const p of ['.gitignore', 'my.env', 'env.ts', 'my.git/x', 'node_modules2/x', 'pem.txt']) {
      expect(await guard.resolveForWrite(p)).toBe(path.join(root, p));
    }
  });

  it('checks the real path too: a symlink into .git is refused', async () => {
    await mkdir(path.join(root, '.git'));
    await symlink(path.join(root, '.git'), path.join(root, 'innocent'));
    await denied(guard.resolveForWrite('innocent/config'), /protected pattern "\*\*\/\.git\/\*\*"/);
  });

  it('refuses a protected entry named for delete or move with the same message', async () => {
    await denied(
      guard.resolveEntryForWrite('keys/id_rsa'),
      `Access denied: ${path.join(root, 'keys/id_rsa')} matches the protected pattern "**/id_rsa*"; files like this (version control, dependencies, keys and secrets) cannot be modified`,
    );
    expect(await guard.resolveEntryForWrite(root)).toBe(root);
  });

  it('uses the given patterns instead of the defaults', async () => {
    const g = await PathGuard.create({ roots: [root], readOnlyRoots: [], blockedPatterns: ['**/*.lock'] });
    await denied(g.resolveForWrite('yarn.lock'), /"\*\*\/\*\.lock"/);
    expect(await g.resolveForWrite('.env')).toBe(path.join(root, '.env'));
    expect(g.blockedPatternFor(path.join(root, 'a/b.lock'))).toBe('**/*.lock');
    expect(g.blockedPatternFor(path.join(root, 'a/b.txt'))).toBeUndefined();
  });
});

describe('read-only roots', () => {
  it('serves reads and refuses writes', async () => {
    const ro = path.join(base, 'ro');
    await mkdir(ro);
    await writeFile(path.join(ro, 'doc.txt'), 'doc');
    const g = await PathGuard.create({ roots: [root], readOnlyRoots: [ro] });
    expect(g.allowed()).toEqual({ read_write: [root], read_only: [ro] });
    expect(await g.resolveForRead(path.join(ro, 'doc.txt'))).toBe(path.join(ro, 'doc.txt'));
    await denied(
      g.resolveForWrite(path.join(ro, 'doc.txt')),
      `Access denied: ${path.join(ro, 'doc.txt')} is in the read-only directory ${ro}; writes are allowed only under: ${root}`,
    );
    await denied(g.resolveForWrite(path.join(ro, 'new.txt')), /read-only directory/);
  });

  it('lets a read-only root nested in a read-write root win inside it, even through a symlink', async () => {
    const ref = path.join(root, 'ref');
    await mkdir(ref);
    await writeFile(path.join(ref, 'a.txt'), 'a');
    await symlink(ref, path.join(root, 'to-ref'));
    const g = await PathGuard.create({ roots: [root], readOnlyRoots: [ref] });
    expect(await g.resolveForRead('ref/a.txt')).toBe(path.join(ref, 'a.txt'));
    await denied(g.resolveForWrite('ref/a.txt'), /read-only directory/);
    await denied(g.resolveForWrite('ref/new.txt'), /read-only directory/);
    await denied(g.resolveForWrite('to-ref/new.txt'), /read-only directory/);
    expect(await g.resolveForWrite('other.txt')).toBe(path.join(root, 'other.txt'));
    expect(g.isRoot(ref)).toBe(true);
  });

  it('makes a directory listed both read-write and read-only read-only, in either spelling', async () => {
    const g = await PathGuard.create({ roots: [root], readOnlyRoots: [root] });
    expect(g.allowed()).toEqual({ read_write: [], read_only: [root] });
    expect(await g.resolveForRead('a.txt')).toBe(path.join(root, 'a.txt'));
    await denied(g.resolveForWrite('a.txt'), /is in the read-only directory/);
    await denied(g.resolveEntryForWrite('a.txt'), /is in the read-only directory/);
    const alias = path.join(base, 'alias');
    await symlink(root, alias);
    const spelt = await PathGuard.create({ roots: [alias], readOnlyRoots: [root] });
    await denied(spelt.resolveForWrite(path.join(alias, 'a.txt')), /is in the read-only directory/);
  });
});

describe('relativeInside', () => {
  it('compares whole components, not string prefixes', () => {
    expect(relativeInside('/a/project', '/a/project')).toBe('');
    expect(relativeInside('/a/project', '/a/project/src/x')).toBe(path.join('src', 'x'));
    expect(relativeInside('/a/project', '/a/project2')).toBeNull();
    expect(relativeInside('/a/project', '/a')).toBeNull();
    expect(relativeInside('/a/project', '/a/project/..foo')).toBe('..foo');
  });
});

describe('links resolved one step at a time', () => {
  it('follows a relative link from one root into a sibling root, and an absolute one in either spelling', async () => {
    const other = path.join(base, 'other');
    await mkdir(other);
    await writeFile(path.join(other, 'shared.txt'), 's');
    const alias = path.join(base, 'alias');
    await symlink(other, alias);
    const g = await PathGuard.create({ roots: [root, alias], readOnlyRoots: [] });
    await symlink('../other/shared.txt', path.join(root, 'rel'));
    await symlink(path.join(alias, 'shared.txt'), path.join(root, 'abs'));
    await symlink(path.join(base, '.', 'other', 'shared.txt'), path.join(root, 'dotted'));
    for (const name of ['rel', 'abs', 'dotted']) {
      expect(await g.resolveForRead(name)).toBe(path.join(other, 'shared.txt'));
    }
    // The same relative link with only one root leads outside.
    await denied(guard.resolveForRead('rel'), /rel is outside the allowed directories/);
  });

  it('resolves .. after a link physically, as the kernel does', async () => {
    await mkdir(path.join(root, 'a/b'), { recursive: true });
    await writeFile(path.join(root, 'a/x.txt'), 'x');
    await symlink('a/b', path.join(root, 'to-b'));
    await symlink('to-b/../x.txt', path.join(root, 'via'));
    expect(await guard.resolveForRead('via')).toBe(path.join(root, 'a/x.txt'));
  });

  it('keeps the missing tail of a new path under a link that stays inside', async () => {
    await mkdir(path.join(root, 'real'));
    await symlink('real', path.join(root, 'alias'));
    expect(await guard.resolveForWrite('alias/new/deep.txt')).toBe(path.join(root, 'real/new/deep.txt'));
  });
});

describe('Unicode normalisation', () => {
  const nfc = 'caf\u00e9.txt';
  const nfd = 'cafe\u0301.txt';

  it('finds an existing file or directory whose name differs only in normalisation', async () => {
    await writeFile(path.join(root, nfc), 'x');
    expect(await guard.resolveForRead(nfd)).toBe(path.join(root, nfc));
    expect(await guard.resolveForWrite(nfd)).toBe(path.join(root, nfc));
    expect(await guard.resolveEntryForWrite(nfd)).toBe(path.join(root, nfc));
    await mkdir(path.join(root, 'r\u00e9sum\u00e9'));
    expect(await guard.resolveForWrite('re\u0301sume\u0301/new.txt')).toBe(
      path.join(root, 'r\u00e9sum\u00e9', 'new.txt'),
    );
  });

  it('prefers the exact name, keeps a new name as given, and refuses an ambiguous one', async () => {
    expect(await guard.resolveForWrite(nfd)).toBe(path.join(root, nfd));
    await writeFile(path.join(root, nfc), 'composed');
    await writeFile(path.join(root, nfd), 'decomposed');
    expect(await guard.resolveForRead(nfc)).toBe(path.join(root, nfc));
    expect(await guard.resolveForRead(nfd)).toBe(path.join(root, nfd));
    // A third spelling (é composed, "e" + accent elsewhere) matching both existing ones is ambiguous.
    await mkdir(path.join(root, 'd'));
    await writeFile(path.join(root, 'd', '\u00e9\u00e9'), '1');
    await writeFile(path.join(root, 'd', 'e\u0301e\u0301'), '2');
    await denied(guard.resolveForRead('d/\u00e9e\u0301'), /differ only in Unicode normalisation/);
  });
});

describe('descriptors', () => {
  it('uses verified descriptors where /proc/self/fd works, and plain paths when told not to', async () => {
    expect(guard.raceFree).toBe(process.platform === 'linux');
    const plain = await PathGuard.create({ roots: [root], readOnlyRoots: [], verifyDescriptors: false });
    expect(plain.raceFree).toBe(false);
  });
});
