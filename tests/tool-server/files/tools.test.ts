import { readFileSync } from 'node:fs';
import {
  chmod,
  link,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
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
import { parse } from 'yaml';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import type { Tool, ToolContext } from '../../../tool-server/kit/define.ts';
import { ToolError, ToolInputError } from '../../../tool-server/kit/errors.ts';
import { writeReplacing } from '../../../tool-server/tools/files/common.ts';
import { fileSystemTools } from '../../../tool-server/tools/files/tools.ts';

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
  it('offers the tools its toolset file lists, with annotations that match what they do', () => {
    // The family's list and toolsets/file_system_tools.yaml name the same tools: a new tool needs both, and
    // nothing here.
    const listed = (parse(readFileSync('toolsets/file_system_tools.yaml', 'utf8')) as { tools: string[] })
      .tools;
    expect(fileSystemTools.map((t) => t.name).sort()).toEqual([...listed].sort());
    for (const name of [
      'read_text_file',
      'read_media_file',
      'list_directory',
      'search_files',
      'get_file_info',
    ]) {
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
    // The last 250 bytes start mid-line: that partial line is dropped and the marker goes on top.
    const tail = await run('read_text_file', { path: 'big.txt', tail: 5 }, small);
    expect(tail).toMatchObject({ truncated: true, line_count: 2 });
    expect(tail.content).toBe(`[truncated: first 9800 of 10000 bytes not shown]\n${big.slice(-200)}`);
    // Within the cap, but still not the whole file: truncated, without a marker.
    const head = await run('read_text_file', { path: 'big.txt', head: 2 }, small);
    expect(head).toMatchObject({ truncated: true, content: big.slice(0, 200), line_count: 2 });
  });

  it('does not split a multi-byte character at the cap, nor count its bytes as shown', async () => {
    await writeFile(at('u.txt'), 'ééééé'); // 10 bytes
    const r = await run('read_text_file', { path: 'u.txt' }, { ...ctx, maxReadBytes: 5 });
    expect(r.content).toBe('éé\n[truncated: showed 4 of 10 bytes]');
    // A tail that is one cut line keeps the line, minus the half character it starts with.
    const tail = await run('read_text_file', { path: 'u.txt', tail: 1 }, { ...ctx, maxReadBytes: 5 });
    expect(tail.content).toBe('[truncated: first 6 of 10 bytes not shown]\néé');
  });

  it('reports binary files without decoding them', async () => {
    await writeFile(at('b.bin'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]));
    expect(await run('read_text_file', { path: 'b.bin' })).toMatchObject({
      binary: true,
      encoding: null,
      content: null,
      line_count: null,
      size_bytes: 6,
    });
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

describe('truncation and line counts', () => {
  it('is not capped when the tail lines exactly fill the cap', async () => {
    await writeFile(at('t.txt'), 'a\nbb\ncc\n'); // the last two lines are 6 bytes
    const r = await run('read_text_file', { path: 't.txt', tail: 2 }, { ...ctx, maxReadBytes: 6 });
    expect(r).toMatchObject({ content: 'bb\ncc\n', line_count: 2, truncated: true });
    const all = await run('read_text_file', { path: 't.txt', tail: 3 }, { ...ctx, maxReadBytes: 8 });
    expect(all).toMatchObject({ content: 'a\nbb\ncc\n', line_count: 3, truncated: false });
  });

  it('drops the partial first line of a capped tail and puts the marker on top', async () => {
    // 24 bytes; the last 16 are "ne\nsecond\nthird\n", and "ne\n" is the end of a cut line.
    await writeFile(at('t.txt'), 'first line\nsecond\nthird\n');
    const r = await run('read_text_file', { path: 't.txt', tail: 3 }, { ...ctx, maxReadBytes: 16 });
    expect(r.content).toBe('[truncated: first 11 of 24 bytes not shown]\nsecond\nthird\n');
    expect(r).toMatchObject({ truncated: true, line_count: 2 });
  });

  it('sets truncated whenever the content is not the whole file, in both read tools', async () => {
    await writeFile(at('n.txt'), '1\n2\n3\n');
    await writeFile(at('big.txt'), 'x'.repeat(100));
    const read = (args: object, c = ctx) => run('read_text_file', { path: 'n.txt', ...args }, c);
    expect(await read({})).toMatchObject({ truncated: false, line_count: 3 });
    expect(await read({ head: 1 })).toMatchObject({ truncated: true, line_count: 1, content: '1\n' });
    expect(await read({ tail: 1 })).toMatchObject({ truncated: true, line_count: 1, content: '3\n' });
    expect(await read({ head: 3 })).toMatchObject({ truncated: false, line_count: 3 });
    expect(await read({ tail: 9 })).toMatchObject({ truncated: false, line_count: 3 });
    const multi = await run(
      'read_multiple_files',
      { paths: ['n.txt', 'big.txt'] },
      { ...ctx, maxReadBytes: 10 },
    );
    expect(multi.files[0]).toMatchObject({ truncated: false, line_count: 3 });
    expect(multi.files[1]).toMatchObject({ truncated: true, line_count: 1 });
    expect(multi.files[1].content).toBe(`${'x'.repeat(10)}\n[truncated: showed 10 of 100 bytes]`);
    for (const name of ['read_text_file', 'read_multiple_files']) {
      expect(tool(name).description).toContain(
        '`truncated` is true whenever `content` is not the whole file',
      );
    }
  });
});

describe('text or binary', () => {
  it('calls a file binary for a NUL byte anywhere in what was read, not only the first 8 KiB', async () => {
    const text = Buffer.from(`${'a'.repeat(9000)}\n`);
    await writeFile(at('late-nul.bin'), Buffer.concat([text, Buffer.from([0, 1, 2, 0x0a])]));
    expect(await run('read_text_file', { path: 'late-nul.bin' })).toMatchObject({ binary: true });
    expect(await run('read_text_file', { path: 'late-nul.bin', tail: 1 })).toMatchObject({ binary: true });
    // A tail that skips the NULs at the start still looks there.
    await writeFile(at('early-nul.bin'), Buffer.concat([Buffer.from([0, 0x0a]), text]));
    expect(await run('read_text_file', { path: 'early-nul.bin', tail: 1 })).toMatchObject({ binary: true });
    await fails('edit_file', { path: 'late-nul.bin', edits: [{ old_text: 'a', new_text: 'b' }] }, /binary/);
  });

  it('shows invalid UTF-8 with replacement characters and says so, but will not edit it', async () => {
    await writeFile(at('latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    expect(await run('read_text_file', { path: 'latin1.txt' })).toMatchObject({
      binary: false,
      encoding: 'utf-8 (invalid bytes replaced)',
      content: 'caf\ufffd\n',
      line_count: 1,
    });
    await writeFile(at('ok.txt'), 'café\n');
    expect((await run('read_text_file', { path: 'ok.txt' })).encoding).toBe('utf-8');
    await fails(
      'edit_file',
      { path: 'latin1.txt', edits: [{ old_text: 'caf', new_text: 'tea' }] },
      /not valid UTF-8/,
    );
    expect(await readFile(at('latin1.txt'))).toEqual(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
  });
});

describe('paths that end in a slash', () => {
  it('are refused by the tools that act on a file', async () => {
    await writeFile(at('a.txt'), 'A');
    await fails('write_file', { path: 'notes/', content: 'x' }, /"notes\/" ends with a slash.*write_file/);
    expect(await exists(at('notes'))).toBe(false);
    await fails('read_text_file', { path: 'a.txt/' }, /ends with a slash/);
    await fails(
      'edit_file',
      { path: 'a.txt/', edits: [{ old_text: 'A', new_text: 'B' }] },
      /ends with a slash/,
    );
    await fails('delete_file', { path: 'a.txt/' }, /ends with a slash/);
    await fails('write_file', { path: 'notes/.', content: 'x' }, /names a directory/);
    const multi = await run('read_multiple_files', { paths: ['a.txt/', 'a.txt'] });
    expect(multi.files[0]).toMatchObject({ ok: false, error: /ends with a slash/ });
    expect(multi.files[1]).toMatchObject({ ok: true, content: 'A' });
    expect(await readFile(at('a.txt'), 'utf8')).toBe('A');
  });

  it('are accepted by the directory tools', async () => {
    expect(await run('create_directory', { path: 'd/' })).toMatchObject({ path: at('d'), action: 'created' });
    expect(await run('list_directory', { path: 'd/' })).toMatchObject({ path: at('d'), entries: [] });
    expect(await run('get_file_info', { path: 'd/' })).toMatchObject({ type: 'directory' });
    expect(await run('delete_directory', { path: 'd/' })).toMatchObject({ path: at('d'), deleted: true });
  });
});

describe('writes replace the file', () => {
  it('never write through a hard link to a file outside the roots', async () => {
    const outside = path.join(base, 'outside.txt');
    await writeFile(outside, 'outside\n');
    await link(outside, at('hl.txt'));
    await run('write_file', { path: 'hl.txt', content: 'new\n' });
    expect(await readFile(outside, 'utf8')).toBe('outside\n');
    expect(await readFile(at('hl.txt'), 'utf8')).toBe('new\n');
    await link(outside, at('hl2.txt'));
    await run('edit_file', { path: 'hl2.txt', edits: [{ old_text: 'outside', new_text: 'edited' }] });
    expect(await readFile(outside, 'utf8')).toBe('outside\n');
    expect(await readFile(at('hl2.txt'), 'utf8')).toBe('edited\n');
  });

  it('keep the permission bits of the file they replace and leave no temp file', async () => {
    await writeFile(at('p.sh'), 'echo 1\n');
    await chmod(at('p.sh'), 0o750);
    await run('write_file', { path: 'p.sh', content: 'echo 2\n' });
    expect((await stat(at('p.sh'))).mode & 0o777).toBe(0o750);
    await run('edit_file', { path: 'p.sh', edits: [{ old_text: '2', new_text: '3' }] });
    expect((await stat(at('p.sh'))).mode & 0o777).toBe(0o750);
    expect(await readdir(root)).toEqual(['p.sh']);
  });

  it('remove the temp file when the replacement fails', async () => {
    await mkdir(at('d/target'), { recursive: true });
    await writeFile(at('d/target/inside'), '');
    const dir = await ctx.paths.openDirectory(at('d'));
    await expect(writeReplacing(dir, 'target', 'x')).rejects.toThrow(ToolError);
    await dir.close();
    expect(await readdir(at('d'))).toEqual(['target']);
  });
});

describe('review fixes for editing, moving, deleting and searching', () => {
  it('writes new lines as CRLF in a CRLF file even when old_text has no newline', async () => {
    await writeFile(at('w.txt'), 'a\r\nb\r\n');
    await run('edit_file', { path: 'w.txt', edits: [{ old_text: 'a', new_text: 'a\nx' }] });
    expect(await readFile(at('w.txt'), 'utf8')).toBe('a\r\nx\r\nb\r\n');
    await writeFile(at('lf.txt'), 'a\nb\n');
    await run('edit_file', { path: 'lf.txt', edits: [{ old_text: 'a', new_text: 'a\nx' }] });
    expect(await readFile(at('lf.txt'), 'utf8')).toBe('a\nx\nb\n');
  });

  it('refuses to delete_directory a symlink, leaving the link and its target', async () => {
    await mkdir(at('important'));
    await writeFile(at('important/a.txt'), 'a');
    await symlink(at('important'), at('ln'));
    for (const p of ['ln', 'ln/']) {
      await fails(
        'delete_directory',
        { path: p, recursive: true },
        new RegExp(`${at('ln')} is a symbolic link; use delete_file to remove the link`),
      );
    }
    expect(await readFile(at('important/a.txt'), 'utf8')).toBe('a');
    expect(await readlink(at('ln'))).toBe(at('important'));
  });

  it('refuses a move that would put an entry on a protected path', async () => {
    await mkdir(at('d'));
    await writeFile(at('d/config.json'), '{}');
    await fails(
      'move_file',
      { source: 'd', destination: '.docker' },
      /d\/config\.json, which would become .*\.docker\/config\.json, matching the protected pattern/,
    );
    expect(await exists(at('.docker'))).toBe(false);
    expect(await exists(at('d/config.json'))).toBe(true);
    expect(await run('move_file', { source: 'd', destination: 'docker' })).toMatchObject({
      type: 'directory',
    });
  });

  it('takes an absolute search pattern under `path` as relative, and refuses one elsewhere', async () => {
    await mkdir(at('src'));
    await writeFile(at('src/a.ts'), '');
    const r = await run('search_files', { path: 'src', pattern: `${at('src')}/*.ts` });
    expect(r).toMatchObject({ pattern: '*.ts', match_count: 1, matches: [{ path: 'a.ts', type: 'file' }] });
    await fails('search_files', { path: 'src', pattern: '/etc/*.conf' }, /patterns are relative to `path`/);
    await fails('search_files', { path: 'src', pattern: `${root}/*.ts` }, /is absolute and not under/);
  });
});
