import { chmod, mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import type { ToolContext } from '../../../tool-server/kit/define.ts';
import { fileSystemTools } from '../../../tool-server/tools/files/tools.ts';

// The existence oracle of issue 5 §4: whatever lies beyond the roots, a refused path gets the same one
// message, and no listing says where an outward link points.

let base: string;
let root: string;
let outside: string;
let ctx: ToolContext;

beforeEach(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'fs-oracle-')));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  await mkdir(path.join(outside, 'dir'), { recursive: true });
  await writeFile(path.join(outside, 'secret.txt'), 'secret');
  await mkdir(path.join(outside, 'locked'));
  await writeFile(path.join(outside, 'locked', 'x'), 'x');
  await chmod(path.join(outside, 'locked'), 0o000);
  ctx = { paths: await PathGuard.create({ roots: [root], readOnlyRoots: [] }), maxReadBytes: 4096 };
  // Outward links: to what exists, to what does not, to a file used as a directory, to a locked directory.
  await symlink(path.join(outside, 'secret.txt'), path.join(root, 'to-file'));
  await symlink(path.join(outside, 'missing.txt'), path.join(root, 'to-missing'));
  await symlink(path.join(outside, 'dir'), path.join(root, 'to-dir'));
  await symlink(path.join(outside, 'locked'), path.join(root, 'to-locked'));
  await symlink('../outside/secret.txt', path.join(root, 'relative'));
  await symlink(outside, path.join(root, 'to-outside'));
});

afterEach(async () => {
  await chmod(path.join(outside, 'locked'), 0o700);
  await rm(base, { recursive: true, force: true });
});

/** Paths that lead outside in every way the review found messages to differ. */
const REFUSED = [
  'to-file',
  'to-missing',
  'to-missing/deeper.txt',
  'to-dir',
  'to-dir/new.txt',
  'to-dir/missing/deeper.txt',
  'to-file/child',
  'to-locked/x',
  'relative',
  'to-outside/secret.txt',
  'to-outside/missing.txt',
  'to-outside/secret.txt/child',
  '../outside/secret.txt',
  '../outside/missing.txt',
  '../outside/secret.txt/child',
  '../outside/locked/x',
];

/** The one call per tool that takes a path, with `p` as the path (and harmless other arguments). */
const CALLS: [string, (p: string) => Record<string, unknown>][] = [
  ['read_text_file', (p) => ({ path: p })],
  ['read_media_file', (p) => ({ path: p })],
  ['write_file', (p) => ({ path: p, content: 'x' })],
  ['edit_file', (p) => ({ path: p, edits: [{ old_text: 'a', new_text: 'b' }] })],
  ['create_directory', (p) => ({ path: p })],
  ['list_directory', (p) => ({ path: p })],
  ['list_directory_with_sizes', (p) => ({ path: p })],
  ['directory_tree', (p) => ({ path: p })],
  ['search_files', (p) => ({ path: p, pattern: '*' })],
  ['get_file_info', (p) => ({ path: p })],
  ['delete_file', (p) => ({ path: `${p}/x` })],
  ['delete_directory', (p) => ({ path: `${p}/x` })],
  ['move_file', (p) => ({ source: 'here.txt', destination: p })],
];

async function errorOf(name: string, args: Record<string, unknown>): Promise<string> {
  const tool = fileSystemTools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  return tool.run(args, ctx).then(
    (r) => `succeeded: ${JSON.stringify(r)}`,
    (e: Error) => e.message,
  );
}

describe('a refused path', () => {
  it('gets one message from every tool, the same whatever exists beyond the roots', async () => {
    await writeFile(path.join(root, 'here.txt'), 'here');
    const allowed = `(read-write: ${root}; read-only: none)`;
    for (const [name, args] of CALLS) {
      for (const p of REFUSED) {
        const written = path.resolve(
          root,
          name === 'delete_file' || name === 'delete_directory' ? `${p}/x` : p,
        );
        const message = await errorOf(name, args(p));
        expect(message, `${name} ${p}`).toBe(
          `Access denied: ${written} is outside the allowed directories ${allowed}`,
        );
      }
    }
  });

  it('never names where an outward link points', async () => {
    for (const [name, args] of CALLS) {
      for (const p of ['to-file', 'to-dir/new.txt', 'relative', 'to-outside/secret.txt']) {
        expect(await errorOf(name, args(p))).not.toContain(outside);
      }
    }
  });

  it('is the same for read_multiple_files, entry by entry', async () => {
    const tool = fileSystemTools.find((t) => t.name === 'read_multiple_files');
    const r = (await tool?.run({ paths: REFUSED }, ctx)) as {
      files: { ok: boolean; error: string; path: string }[];
    };
    for (const file of r.files) {
      expect(file.ok).toBe(false);
      expect(file.error).toBe(
        `Access denied: ${file.path} is outside the allowed directories (read-write: ${root}; read-only: none)`,
      );
    }
  });
});

describe('listings', () => {
  it('show an outward link as a symlink by name only, in every listing tool', async () => {
    for (const [name, args] of [
      ['list_directory', { path: '.' }],
      ['list_directory_with_sizes', { path: '.' }],
      ['directory_tree', { path: '.' }],
      ['search_files', { path: '.', pattern: 'to-*' }],
    ] as const) {
      const shown = await errorOf(name, args);
      expect(shown.startsWith('succeeded')).toBe(true);
      expect(shown).toContain('"to-file"');
      expect(shown).toContain('"symlink"');
      expect(shown).not.toContain(outside);
      expect(shown).not.toContain('secret');
    }
  });
});
