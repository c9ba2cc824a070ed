import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import type { ToolContext } from '../../../tool-server/kit/define.ts';
import { fileSystemTools } from '../../../tool-server/tools/files/tools.ts';
import { checkSubtree, moveAcross, removeTree } from '../../../tool-server/tools/files/tree.ts';

// The check-then-use gap closed deterministically: each test checks a path, swaps a directory on it for an
// outward symlink (what a racing process would do), and only then lets the operation run.

const linux = process.platform === 'linux';
let base: string;
let root: string;
let outside: string;
let ctx: ToolContext;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'fs-fd-')));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  await mkdir(outside);
  await writeFile(path.join(outside, 'f.txt'), 'OUTSIDE');
  ctx = { paths: await PathGuard.create({ roots: [root], readOnlyRoots: [] }), maxReadBytes: 4096 };
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const at = (p: string) => path.join(root, p);

/** Puts an outward symlink where the directory `rel` was, keeping the real one aside inside the root. */
async function swap(rel: string): Promise<void> {
  await rename(at(rel), at(`${rel}.held`));
  await symlink(outside, at(rel));
}

async function run(name: string, args: unknown, context = ctx): Promise<any> {
  const tool = fileSystemTools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.run(args, context);
}

describe.runIf(linux)('a directory swapped between the check and the use', () => {
  it('is refused when the operation opens it, and nothing outside is read or written', async () => {
    await mkdir(at('d'));
    await writeFile(at('d/f.txt'), 'inside');
    const real = await ctx.paths.resolveForWrite('d/f.txt');
    await swap('d');
    await expect(ctx.paths.withParent(real, async () => 'ran')).rejects.toThrow(
      /d changed while it was being used .* nothing was done, try again/,
    );
    await expect(ctx.paths.makeDirectory(path.dirname(real))).rejects.toThrow(
      /changed while it was being used/,
    );
    expect(await readdir(outside)).toEqual(['f.txt']);
  });

  it('stops mkdir -p at the swapped component: nothing is created beyond it', async () => {
    await mkdir(at('a'));
    const real = await ctx.paths.resolveForWrite('a/b/c');
    await swap('a');
    await expect(ctx.paths.makeDirectory(real)).rejects.toThrow(/a changed while it was being used/);
    expect(await readdir(outside)).toEqual(['f.txt']);
  });

  it('acts inside the directory it opened, wherever its name now leads', async () => {
    await mkdir(at('d'));
    const real = await ctx.paths.resolveForWrite('d/new.txt');
    const written = ctx.paths.withParent(real, async (dir, name) => {
      await swap('d'); // after the descriptor was verified
      await writeFile(dir.entry(name), 'through the descriptor');
      return dir.entry(name);
    });
    expect(await written).toMatch(/^\/proc\/self\/fd\/\d+\/new\.txt$/);
    expect(await readFile(at('d.held/new.txt'), 'utf8')).toBe('through the descriptor');
    expect(await readdir(outside)).toEqual(['f.txt']);
  });

  it('rm -r after the subtree check removes a swapped-in link itself, never what it points to', async () => {
    await mkdir(at('tree/sub'), { recursive: true });
    await writeFile(at('tree/sub/a.txt'), 'a');
    await ctx.paths.withParent(at('tree'), async (parent, name) => {
      const { dir } = await parent.child(name);
      expect(await checkSubtree(ctx, dir, 'deleted')).toBe(2);
      await dir.close();
      await swap('tree/sub');
      await removeTree(parent, name);
    });
    expect(await readdir(root)).toEqual([]);
    expect(await readFile(path.join(outside, 'f.txt'), 'utf8')).toBe('OUTSIDE');
  });

  it('refuses a removal whose top directory was swapped after the check', async () => {
    await mkdir(at('tree'));
    await ctx.paths.withParent(at('tree'), async (parent, name) => {
      await swap('tree');
      await expect(removeTree(parent, name)).rejects.toThrow(/tree changed while it was being used/);
    });
    expect(await readdir(outside)).toEqual(['f.txt']);
  });
});

describe('moves across file systems', () => {
  it('copies through descriptors, keeping modes, times and links, then removes the original', async () => {
    await mkdir(at('src/inner'), { recursive: true });
    await writeFile(at('src/inner/run.sh'), 'echo hi\n', { mode: 0o750 });
    await symlink('inner/run.sh', at('src/link'));
    await mkdir(at('dst'));
    const mtime = (await stat(at('src/inner/run.sh'))).mtimeMs;
    await ctx.paths.withParent(at('src'), (from, name) =>
      ctx.paths.withParent(at('dst/moved'), (to, toName) =>
        moveAcross(from, name, to, toName, () => undefined),
      ),
    );
    expect(await readFile(at('dst/moved/inner/run.sh'), 'utf8')).toBe('echo hi\n');
    expect((await stat(at('dst/moved/inner/run.sh'))).mode & 0o777).toBe(0o750);
    expect(Math.round((await stat(at('dst/moved/inner/run.sh'))).mtimeMs)).toBe(Math.round(mtime));
    expect(await readlink(at('dst/moved/link'))).toBe('inner/run.sh');
    expect(await lstat(at('src')).catch(() => null)).toBeNull();
  });

  it('leaves the original and removes its partial copy when something cannot be copied', async () => {
    await mkdir(at('src'));
    await writeFile(at('src/a.txt'), 'a');
    const server = createServer();
    await new Promise<void>((r) => server.listen(at('src/socket'), r));
    try {
      const failure = ctx.paths.withParent(at('src'), (from, name) =>
        ctx.paths.withParent(at('copy'), (to, toName) => moveAcross(from, name, to, toName, () => undefined)),
      );
      await expect(failure).rejects.toThrow(/special file .* cannot be moved to another file system/);
    } finally {
      await new Promise((r) => server.close(r));
    }
    expect(await lstat(at('copy')).catch(() => null)).toBeNull();
    expect(await readFile(at('src/a.txt'), 'utf8')).toBe('a');
  });

  it('works through move_file between two real file systems', async (t) => {
    const shm = '/dev/shm';
    const other = await stat(shm).catch(() => null);
    if (!other?.isDirectory() || other.dev === (await stat(base)).dev) t.skip();
    const second = await mkdtemp(path.join(shm, 'fs-fd-'));
    try {
      const paths = await PathGuard.create({ roots: [root, second], readOnlyRoots: [] });
      const c = { ...ctx, paths };
      await mkdir(at('dir/sub'), { recursive: true });
      await writeFile(at('dir/sub/x.txt'), 'x');
      await writeFile(at('file.txt'), 'f');
      expect(
        await run('move_file', { source: 'file.txt', destination: `${second}/file.txt` }, c),
      ).toMatchObject({
        type: 'file',
      });
      expect(await run('move_file', { source: 'dir', destination: `${second}/dir` }, c)).toMatchObject({
        type: 'directory',
      });
      expect(await readFile(path.join(second, 'file.txt'), 'utf8')).toBe('f');
      expect(await readFile(path.join(second, 'dir/sub/x.txt'), 'utf8')).toBe('x');
      expect(await readdir(root)).toEqual([]);
    } finally {
      await rm(second, { recursive: true, force: true });
    }
  });
});

describe('without /proc (plain paths)', () => {
  it('runs every file tool the same way, serialised by the lock', async () => {
    const paths = await PathGuard.create({ roots: [root], readOnlyRoots: [], verifyDescriptors: false });
    expect(paths.raceFree).toBe(false);
    const c = { ...ctx, paths };
    expect(await run('write_file', { path: 'a/b/c.txt', content: 'one\n' }, c)).toMatchObject({
      action: 'created',
    });
    expect((await run('read_text_file', { path: 'a/b/c.txt' }, c)).content).toBe('one\n');
    await run('edit_file', { path: 'a/b/c.txt', edits: [{ old_text: 'one', new_text: 'two' }] }, c);
    expect(await readFile(at('a/b/c.txt'), 'utf8')).toBe('two\n');
    expect(await run('create_directory', { path: 'a/new' }, c)).toMatchObject({ action: 'created' });
    expect((await run('list_directory', { path: 'a' }, c)).entries).toEqual([
      { name: 'b', type: 'directory' },
      { name: 'new', type: 'directory' },
    ]);
    expect((await run('directory_tree', { path: '.' }, c)).node_count).toBe(5);
    expect((await run('search_files', { path: '.', pattern: '*.txt' }, c)).matches).toEqual([
      { path: 'a/b/c.txt', type: 'file' },
    ]);
    expect((await run('get_file_info', { path: 'a/b/c.txt' }, c)).size_bytes).toBe(4);
    await run('move_file', { source: 'a/b/c.txt', destination: 'a/new/d.txt' }, c);
    await run('delete_file', { path: 'a/new/d.txt' }, c);
    expect(await run('delete_directory', { path: 'a', recursive: true }, c)).toMatchObject({
      removed_entries: 2,
    });
    expect(await readdir(root)).toEqual([]);
  });
});
