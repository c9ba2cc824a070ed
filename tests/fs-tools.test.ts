import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  realpath,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../tool-server/path-guard.ts';
import { type Tool, type ToolContext, ToolError, ToolInputError } from '../tool-server/tools/define.ts';
import { fileSystemTools } from '../tool-server/tools/file-system.ts';

let base: string;
let root: string;
let ctx: ToolContext;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'fs-tools-')));
  root = path.join(base, 'root');
  ctx = { paths: await PathGuard.create({ roots: [root], readOnlyRoots: [] }), maxReadBytes: 1024 * 1024 };
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

function tool(name: string): Tool {
  const found = fileSystemTools.find((t) => t.name === name);
  if (!found) throw new Error(`no tool ${name}`);
  return found;
}

async function run(name: string, args: unknown, context: ToolContext = ctx): Promise<any> {
  return tool(name).run(args, context);
}

async function fails(name: string, args: unknown, message: RegExp, context: ToolContext = ctx) {
  const err = await run(name, args, context).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolError);
  expect((err as Error).message).toMatch(message);
}

const at = (p: string) => path.join(root, p);
const exists = (p: string) =>
  lstat(p).then(
    () => true,
    () => false,
  );

describe('the tool set', () => {
  it('lists the tools in order, with annotations that match what they do', () => {
    expect(fileSystemTools.map((t) => t.name)).toEqual([
      'read_text_file',
      'read_multiple_files',
      'write_file',
      'edit_file',
      'create_directory',
      'list_directory',
      'list_directory_with_sizes',
      'directory_tree',
      'search_files',
      'get_file_info',
      'move_file',
      'delete_file',
      'delete_directory',
      'list_allowed_directories',
    ]);
    for (const name of ['read_text_file', 'list_directory', 'search_files', 'get_file_info']) {
      expect(tool(name).annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    }
    for (const name of ['write_file', 'edit_file', 'move_file', 'delete_file', 'delete_directory']) {
      expect(tool(name).annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    }
    expect(tool('create_directory').annotations).toMatchObject({
      destructiveHint: false,
      idempotentHint: true,
    });
  });

  it('rejects invalid arguments with ToolInputError', async () => {
    await expect(run('write_file', { path: 'a.txt' })).rejects.toThrow(ToolInputError);
    await expect(run('read_text_file', { path: 3 })).rejects.toThrow(
      /Invalid arguments for read_text_file: path/,
    );
    await expect(run('read_text_file', { path: 'a', head: 0 })).rejects.toThrow(ToolInputError);
    await expect(run('read_multiple_files', { paths: [] })).rejects.toThrow(ToolInputError);
    await expect(run('edit_file', { path: 'a', edits: [] })).rejects.toThrow(ToolInputError);
    await expect(run('list_directory_with_sizes', { path: '.', sort_by: 'date' })).rejects.toThrow(
      ToolInputError,
    );
  });
});

describe('reading', () => {
  it('reads a text file with its metadata', async () => {
    await writeFile(at('a.txt'), 'one\ntwo\nthree\n');
    const r = await run('read_text_file', { path: 'a.txt' });
    expect(r).toMatchObject({
      path: at('a.txt'),
      content: 'one\ntwo\nthree\n',
      binary: false,
      size_bytes: 14,
      line_count: 3,
      truncated: false,
    });
    expect(new Date(r.modified).toISOString()).toBe(r.modified);
  });

  it('reads the head and the tail, and refuses both at once', async () => {
    await writeFile(at('n.txt'), '1\n2\n3\n4\n5\n');
    await writeFile(at('no-eol.txt'), '1\n2\n3');
    expect((await run('read_text_file', { path: 'n.txt', head: 2 })).content).toBe('1\n2\n');
    expect((await run('read_text_file', { path: 'n.txt', tail: 2 })).content).toBe('4\n5\n');
    expect((await run('read_text_file', { path: 'no-eol.txt', tail: 2 })).content).toBe('2\n3');
    expect((await run('read_text_file', { path: 'n.txt', tail: 50 })).content).toBe('1\n2\n3\n4\n5\n');
    expect((await run('read_text_file', { path: 'n.txt', head: 50 })).content).toBe('1\n2\n3\n4\n5\n');
    await fails('read_text_file', { path: 'n.txt', head: 1, tail: 1 }, /head or tail, not both/);
  });

  it('caps reads at maxReadBytes with a marker, also for head and tail', async () => {
    const big = `${'x'.repeat(99)}\n`.repeat(100); // 10000 bytes
    await writeFile(at('big.txt'), big);
    const small = { ...ctx, maxReadBytes: 250 };
    const r = await run('read_text_file', { path: 'big.txt' }, small);
    expect(r.truncated).toBe(true);
    expect(r.size_bytes).toBe(10000);
    expect(r.content.endsWith('\n[truncated: showed 250 of 10000 bytes]')).toBe(true);
    expect(r.content.startsWith(big.slice(0, 250))).toBe(true);
    const tail = await run('read_text_file', { path: 'big.txt', tail: 5 }, small);
    expect(tail.truncated).toBe(true);
    expect(tail.content).toBe(`${big.slice(-250)}[truncated: showed 250 of 10000 bytes]`);
    const head = await run('read_text_file', { path: 'big.txt', head: 2 }, small);
    expect(head).toMatchObject({ truncated: false, content: big.slice(0, 200), line_count: 2 });
  });

  it('does not split a multi-byte character at the cap', async () => {
    await writeFile(at('u.txt'), 'ééééé'); // 10 bytes
    const r = await run('read_text_file', { path: 'u.txt' }, { ...ctx, maxReadBytes: 5 });
    expect(r.content).toBe('éé\n[truncated: showed 5 of 10 bytes]');
  });

  it('reports binary files without decoding them', async () => {
    await writeFile(at('b.bin'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]));
    await writeFile(at('latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    for (const p of ['b.bin', 'latin1.txt']) {
      expect(await run('read_text_file', { path: p })).toMatchObject({
        binary: true,
        content: null,
        line_count: null,
      });
    }
    expect((await run('read_text_file', { path: 'b.bin' })).size_bytes).toBe(6);
  });

  it('refuses directories and missing files with plain messages', async () => {
    await mkdir(at('d'));
    await fails('read_text_file', { path: 'd' }, /is a directory, not a file; use list_directory/);
    await fails(
      'read_text_file',
      { path: 'missing.txt' },
      new RegExp(`No such file or directory: ${at('missing.txt')}`),
    );
  });

  it('reads several files, one failure not failing the others', async () => {
    await writeFile(at('a.txt'), 'A');
    await writeFile(at('b.txt'), 'B');
    const r = await run('read_multiple_files', { paths: ['a.txt', 'missing.txt', '../escape.txt', 'b.txt'] });
    expect(r.succeeded).toBe(2);
    expect(r.failed).toBe(2);
    expect(r.files[0]).toMatchObject({ ok: true, path: at('a.txt'), content: 'A' });
    expect(r.files[1]).toMatchObject({ ok: false, path: at('missing.txt'), error: /No such file/ });
    expect(r.files[2]).toMatchObject({ ok: false, error: /outside the allowed directories/ });
    expect(r.files[3]).toMatchObject({ ok: true, content: 'B' });
  });

  it('gives file info, including symlinks and permissions', async () => {
    await writeFile(at('f.txt'), 'hello', { mode: 0o640 });
    await symlink(at('f.txt'), at('l.txt'));
    const r = await run('get_file_info', { path: 'f.txt' });
    expect(r).toMatchObject({
      path: at('f.txt'),
      type: 'file',
      size_bytes: 5,
      permissions: '640',
      is_symlink: false,
    });
    for (const key of ['modified', 'accessed']) expect(Date.parse(r[key])).not.toBeNaN();
    const link = await run('get_file_info', { path: 'l.txt' });
    expect(link).toMatchObject({ path: at('f.txt'), is_symlink: true, symlink_path: at('l.txt') });
    expect((await run('get_file_info', { path: '.' })).type).toBe('directory');
  });

  it('refuses to read outside the roots', async () => {
    await fails('read_text_file', { path: '/etc/passwd' }, /Access denied: \/etc\/passwd is outside/);
  });
});

describe('writing and editing', () => {
  it('creates a file with its parent directories, then overwrites it', async () => {
    const created = await run('write_file', { path: 'deep/er/new.txt', content: 'a\nb\n' });
    expect(created).toMatchObject({
      path: at('deep/er/new.txt'),
      action: 'created',
      size_bytes: 4,
      line_count: 2,
    });
    expect(await readFile(at('deep/er/new.txt'), 'utf8')).toBe('a\nb\n');
    const again = await run('write_file', { path: 'deep/er/new.txt', content: 'c' });
    expect(again).toMatchObject({ action: 'overwritten', size_bytes: 1, line_count: 1 });
    expect(await readFile(at('deep/er/new.txt'), 'utf8')).toBe('c');
  });

  it('refuses protected paths and directories', async () => {
    await fails('write_file', { path: '.env', content: 'X=1' }, /protected pattern "\*\*\/\.env\*"/);
    await mkdir(at('d'));
    await fails('write_file', { path: 'd', content: 'x' }, /is a directory/);
    expect(await exists(at('.env'))).toBe(false);
  });

  it('applies edits in order and returns a unified diff', async () => {
    await writeFile(at('e.ts'), 'const a = 1;\nconst b = 2;\nconst c = 3;\n');
    const r = await run('edit_file', {
      path: 'e.ts',
      edits: [
        { old_text: 'const a = 1;', new_text: 'const a = 10;' },
        { old_text: 'a = 10;\nconst b', new_text: 'a = 10;\nlet b' },
      ],
    });
    expect(r).toMatchObject({ path: at('e.ts'), applied: true, changed: true, line_count: 3 });
    expect(await readFile(at('e.ts'), 'utf8')).toBe('const a = 10;\nlet b = 2;\nconst c = 3;\n');
    expect(r.diff).toContain(`--- ${at('e.ts')}`);
    expect(r.diff).toContain('-const a = 1;\n-const b = 2;\n+const a = 10;\n+let b = 2;');
    expect(r.size_bytes).toBe((await stat(at('e.ts'))).size);
  });

  it('dry run returns the diff and leaves the file untouched', async () => {
    await writeFile(at('d.txt'), 'alpha\nbeta\n');
    const r = await run('edit_file', {
      path: 'd.txt',
      edits: [{ old_text: 'beta', new_text: 'gamma' }],
      dry_run: true,
    });
    expect(r.applied).toBe(false);
    expect(r.diff).toMatch(
      /^Index: .*\n=+\n--- .*d\.txt\toriginal\n\+\+\+ .*d\.txt\tmodified\n@@ -1,2 \+1,2 @@\n alpha\n-beta\n\+gamma\n$/,
    );
    expect(await readFile(at('d.txt'), 'utf8')).toBe('alpha\nbeta\n');
  });

  it('refuses missing and ambiguous old_text, writing nothing', async () => {
    await writeFile(at('m.txt'), 'x = 1\nx = 1\ny = 2\n');
    await fails(
      'edit_file',
      { path: 'm.txt', edits: [{ old_text: 'z = 3', new_text: '' }] },
      /Edit 1 of 1 .*not found/,
    );
    await fails(
      'edit_file',
      {
        path: 'm.txt',
        edits: [
          { old_text: 'y = 2', new_text: 'y = 3' },
          { old_text: 'x = 1', new_text: 'x = 0' },
        ],
      },
      /Edit 2 of 2 .*occurs 2 times, include more surrounding context/,
    );
    expect(await readFile(at('m.txt'), 'utf8')).toBe('x = 1\nx = 1\ny = 2\n');
  });

  it('matches LF old_text in a CRLF file and keeps its line endings', async () => {
    await writeFile(at('w.txt'), 'one\r\ntwo\r\n');
    await run('edit_file', { path: 'w.txt', edits: [{ old_text: 'one\ntwo', new_text: 'uno\ndos' }] });
    expect(await readFile(at('w.txt'), 'utf8')).toBe('uno\r\ndos\r\n');
  });

  it('refuses to edit a binary file', async () => {
    await writeFile(at('b.bin'), Buffer.from([1, 0, 2]));
    await fails('edit_file', { path: 'b.bin', edits: [{ old_text: 'a', new_text: 'b' }] }, /binary file/);
  });
});

describe('directories', () => {
  it('creates a directory and says when it already existed', async () => {
    expect(await run('create_directory', { path: 'a/b/c' })).toEqual({
      path: at('a/b/c'),
      action: 'created',
    });
    expect((await stat(at('a/b/c'))).isDirectory()).toBe(true);
    expect(await run('create_directory', { path: 'a/b/c' })).toEqual({
      path: at('a/b/c'),
      action: 'already_existed',
    });
    await writeFile(at('file'), '');
    await fails('create_directory', { path: 'file' }, /already exists and is not a directory/);
  });

  it('lists a directory, showing symlinks as symlinks', async () => {
    await mkdir(at('sub'));
    await writeFile(at('b.txt'), 'bb');
    await symlink(base, at('up'));
    const r = await run('list_directory', { path: '.' });
    expect(r).toEqual({
      path: root,
      entries: [
        { name: 'b.txt', type: 'file' },
        { name: 'sub', type: 'directory' },
        { name: 'up', type: 'symlink' },
      ],
      total_entries: 3,
      truncated: false,
    });
    await fails('list_directory', { path: 'b.txt' }, /is a file, not a directory/);
  });

  it('lists with sizes, sorted by size, with totals', async () => {
    await writeFile(at('small.txt'), 'x');
    await writeFile(at('large.txt'), 'x'.repeat(100));
    await mkdir(at('dir'));
    const r = await run('list_directory_with_sizes', { path: root, sort_by: 'size' });
    expect(r.entries.map((e: { name: string }) => e.name)).toEqual(['large.txt', 'small.txt', 'dir']);
    expect(r.entries[0]).toMatchObject({ type: 'file', size_bytes: 100 });
    expect(r.entries[2]).toMatchObject({ type: 'directory', size_bytes: null });
    expect(r.totals).toEqual({ files: 2, directories: 1, symlinks: 0, other: 0, size_bytes: 101 });
    const byName = await run('list_directory_with_sizes', { path: '.' });
    expect(byName.entries.map((e: { name: string }) => e.name)).toEqual(['dir', 'large.txt', 'small.txt']);
  });

  it('caps a long listing', async () => {
    await Promise.all(Array.from({ length: 1005 }, (_, i) => writeFile(at(`f${i}`), '')));
    const r = await run('list_directory', { path: '.' });
    expect(r).toMatchObject({ total_entries: 1005, truncated: true });
    expect(r.entries).toHaveLength(1000);
  });

  it('builds a tree with excludes, depth limit and unfollowed symlinks', async () => {
    await mkdir(at('src/lib/deep'), { recursive: true });
    await mkdir(at('node_modules/pkg'), { recursive: true });
    await writeFile(at('src/index.ts'), '');
    await writeFile(at('src/lib/deep/x.ts'), '');
    await symlink(base, at('src/loop'));
    const r = await run('directory_tree', { path: '.', exclude_patterns: ['node_modules'], max_depth: 2 });
    expect(r).toMatchObject({ path: root, truncated: false, max_depth: 2, node_count: 5 });
    expect(r.tree).toEqual({
      name: 'root',
      type: 'directory',
      children: [
        {
          name: 'src',
          type: 'directory',
          children: [
            { name: 'index.ts', type: 'file' },
            { name: 'lib', type: 'directory', depth_limited: true },
            { name: 'loop', type: 'symlink' },
          ],
        },
      ],
    });
  });

  it('lists the allowed directories', async () => {
    const ro = path.join(base, 'ro');
    await mkdir(ro);
    const c = { ...ctx, paths: await PathGuard.create({ roots: [root], readOnlyRoots: [ro] }) };
    expect(await run('list_allowed_directories', {}, c)).toEqual({ read_write: [root], read_only: [ro] });
  });
});

describe('search_files', () => {
  beforeEach(async () => {
    await mkdir(at('src/util'), { recursive: true });
    await mkdir(at('node_modules/dep'), { recursive: true });
    await writeFile(at('src/a.ts'), '');
    await writeFile(at('src/a.test.ts'), '');
    await writeFile(at('src/util/b.ts'), '');
    await writeFile(at('src/readme.md'), '');
    await writeFile(at('node_modules/dep/index.ts'), '');
  });

  it('matches basenames anywhere for a pattern without a slash, honouring excludes', async () => {
    const r = await run('search_files', {
      path: '.',
      pattern: '*.ts',
      exclude_patterns: ['node_modules', '*.test.ts'],
    });
    expect(r).toMatchObject({ path: root, pattern: '*.ts', truncated: false, match_count: 2 });
    expect(r.matches).toEqual([
      { path: 'src/a.ts', type: 'file' },
      { path: 'src/util/b.ts', type: 'file' },
    ]);
  });

  it('matches the relative path for a pattern with a slash, and caps results', async () => {
    const r = await run('search_files', { path: 'src', pattern: 'util/*.ts' });
    expect(r.matches).toEqual([{ path: 'util/b.ts', type: 'file' }]);
    const top = await run('search_files', { path: '.', pattern: 'src/*.ts' });
    expect(top.matches.map((m: { path: string }) => m.path)).toEqual(['src/a.test.ts', 'src/a.ts']);
    const capped = await run('search_files', { path: '.', pattern: '*.ts', max_results: 2 });
    expect(capped).toMatchObject({ truncated: true, match_count: 2 });
  });
});

describe('moving and deleting', () => {
  it('moves a file and refuses an existing destination or a root', async () => {
    await writeFile(at('a.txt'), 'A');
    await writeFile(at('b.txt'), 'B');
    await mkdir(at('dir'));
    const r = await run('move_file', { source: 'a.txt', destination: 'dir/c.txt' });
    expect(r).toEqual({ source: at('a.txt'), destination: at('dir/c.txt'), type: 'file' });
    expect(await exists(at('a.txt'))).toBe(false);
    expect(await readFile(at('dir/c.txt'), 'utf8')).toBe('A');
    await fails(
      'move_file',
      { source: 'b.txt', destination: 'dir/c.txt' },
      /already exists; delete it first/,
    );
    expect(await readFile(at('dir/c.txt'), 'utf8')).toBe('A');
    await fails('move_file', { source: '.', destination: 'elsewhere' }, /allowed directories itself/);
    await fails(
      'move_file',
      { source: 'b.txt', destination: 'nope/b.txt' },
      /parent .* is not an existing directory/,
    );
  });

  it('refuses to move a directory that holds a protected file', async () => {
    await mkdir(at('proj/.git'), { recursive: true });
    await fails('move_file', { source: 'proj', destination: 'proj2' }, /contains .*\.git, which matches/);
    expect(await exists(at('proj/.git'))).toBe(true);
  });

  it('deletes a file and sends directories to delete_directory', async () => {
    await writeFile(at('gone.txt'), 'bye');
    expect(await run('delete_file', { path: 'gone.txt' })).toMatchObject({
      path: at('gone.txt'),
      deleted: true,
    });
    expect(await exists(at('gone.txt'))).toBe(false);
    await mkdir(at('d'));
    await fails('delete_file', { path: 'd' }, /is a directory; use delete_directory/);
    await fails('delete_file', { path: 'gone.txt' }, /No such file or directory/);
  });

  it('refuses a non-empty directory unless recursive, and never a root', async () => {
    await mkdir(at('full/inner'), { recursive: true });
    await writeFile(at('full/inner/f.txt'), 'x');
    await symlink(base, at('full/link'));
    await fails('delete_directory', { path: 'full' }, /is not empty \(2 entries\); pass recursive: true/);
    expect(await exists(at('full/inner/f.txt'))).toBe(true);
    const r = await run('delete_directory', { path: 'full', recursive: true });
    expect(r).toEqual({ path: at('full'), deleted: true, recursive: true, removed_entries: 3 });
    expect(await exists(at('full'))).toBe(false);
    expect(await exists(path.join(base, 'root'))).toBe(true); // the symlink was removed, not followed
    await mkdir(at('empty'));
    expect(await run('delete_directory', { path: 'empty' })).toMatchObject({
      deleted: true,
      recursive: false,
    });
    await fails('delete_directory', { path: '.', recursive: true }, /allowed directories itself/);
  });

  it('refuses a recursive delete that would remove a protected file or a nested root', async () => {
    await mkdir(at('repo/.git'), { recursive: true });
    await fails('delete_directory', { path: 'repo', recursive: true }, /matches the protected pattern/);
    const ref = at('keep/ref');
    await mkdir(ref, { recursive: true });
    const c = { ...ctx, paths: await PathGuard.create({ roots: [root], readOnlyRoots: [ref] }) };
    await fails('delete_directory', { path: 'keep', recursive: true }, /contains the allowed directory/, c);
    expect(await exists(ref)).toBe(true);
  });

  it('deletes and moves a symlink itself, never its target, even one that points outside', async () => {
    await writeFile(at('target.txt'), 'keep me');
    await symlink(at('target.txt'), at('link.txt'));
    expect(await run('delete_file', { path: 'link.txt' })).toMatchObject({
      path: at('link.txt'),
      type: 'symlink',
    });
    expect(await exists(at('link.txt'))).toBe(false);
    expect(await readFile(at('target.txt'), 'utf8')).toBe('keep me');

    const outside = path.join(base, 'elsewhere');
    await mkdir(outside);
    await writeFile(path.join(outside, 'secret.txt'), 's');
    await symlink(outside, at('door'));
    expect(await run('move_file', { source: 'door', destination: 'moved-door' })).toMatchObject({
      type: 'symlink',
    });
    expect(await readlink(at('moved-door'))).toBe(outside);
    expect(await exists(path.join(outside, 'secret.txt'))).toBe(true);
    expect(await run('delete_file', { path: 'moved-door' })).toMatchObject({ deleted: true });
    expect(await exists(path.join(outside, 'secret.txt'))).toBe(true);
  });

  it('refuses to write through a symlink that leads outside', async () => {
    const outside = path.join(base, 'outside');
    await mkdir(outside);
    await symlink(outside, at('out'));
    await fails('write_file', { path: 'out/new.txt', content: 'x' }, /is outside the allowed directories/);
    expect(await exists(path.join(outside, 'new.txt'))).toBe(false);
    expect(await readlink(at('out'))).toBe(outside);
  });
});
