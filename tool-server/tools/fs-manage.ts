import { cp, lstat, rename, rm, rmdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { relativeInside } from '../path-guard.ts';
import { defineTool, type ToolContext, ToolError } from './define.ts';
import { assertFilePath, entryType, existing, fsError, onPath, readDirSorted } from './fs-common.ts';

// The tools that move and delete. They act on an entry itself, never on a final symlink's target. They
// refuse to touch a root, and before a directory is moved or deleted as a whole they check that nothing
// inside it is protected (a .git, a key, another root), and for a move, that nothing lands on a protected path.

function refuseRoot(ctx: ToolContext, real: string, verb: string): void {
  if (ctx.paths.isRoot(real)) {
    throw new ToolError(`${real} is one of the allowed directories itself; it cannot be ${verb}`);
  }
}

/**
 * Walks a directory (without following symlinks) and refuses if anything in it is protected, or, given the
 * `destination` of a move, if anything would land on a protected path there; counts the entries.
 */
async function checkSubtree(
  ctx: ToolContext,
  dir: string,
  verb: string,
  destination?: string,
): Promise<number> {
  const { read_write, read_only } = ctx.paths.allowed();
  for (const root of [...read_write, ...read_only]) {
    const rel = relativeInside(dir, root);
    if (rel !== null && rel !== '') {
      throw new ToolError(`${dir} contains the allowed directory ${root}; it cannot be ${verb}`);
    }
  }
  let count = 0;
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.pop() as string;
    for (const entry of await readDirSorted(current)) {
      const full = path.join(current, entry.name);
      const pattern = ctx.paths.blockedPatternFor(full);
      if (pattern) {
        throw new ToolError(
          `${dir} contains ${full}, which matches the protected pattern "${pattern}"; it cannot be ${verb}`,
        );
      }
      const landing = destination ? path.join(destination, path.relative(dir, full)) : undefined;
      const landingPattern = landing ? ctx.paths.blockedPatternFor(landing) : undefined;
      if (landingPattern) {
        throw new ToolError(
          `${dir} contains ${full}, which would become ${landing}, matching the protected pattern ` +
            `"${landingPattern}"; it cannot be ${verb} there`,
        );
      }
      count++;
      if (entry.isDirectory()) pending.push(full);
    }
  }
  return count;
}

/** Renames or moves a file or directory within the allowed directories, never over an existing path. */
export const moveFile = defineTool({
  name: 'move_file',
  description:
    'Move or rename a file or directory. The destination must not exist (delete it first to replace it) and ' +
    'its parent directory must exist. A symbolic link is moved itself, not its target. Nothing may land on a ' +
    'protected path (.git, keys, secrets). Returns {source, destination, type}.',
  input: z.object({
    source: z.string().describe('Path to move: absolute, or relative to the first allowed directory'),
    destination: z.string().describe('New path, including the new name; must not exist yet'),
  }),
  annotations: { title: 'Move file', readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  async execute(args, ctx) {
    const source = await ctx.paths.resolveEntryForWrite(args.source);
    const destination = await ctx.paths.resolveForWrite(args.destination);
    refuseRoot(ctx, source, 'moved');
    const info = await onPath(source, () => lstat(source));
    if (await existing(destination)) {
      throw new ToolError(`${destination} already exists; delete it first or choose another destination`);
    }
    const parent = path.dirname(destination);
    const parentInfo = await existing(parent);
    if (!parentInfo?.isDirectory()) {
      throw new ToolError(`The destination's parent ${parent} is not an existing directory; create it first`);
    }
    // resolveForWrite has checked the destination itself; a directory's entries are checked where they land.
    if (info.isDirectory()) await checkSubtree(ctx, source, 'moved', destination);
    try {
      await rename(source, destination);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw fsError(err, source);
      // Across file systems: copy (symlinks as they are, never over anything), then remove the original.
      await onPath(destination, () =>
        cp(source, destination, {
          recursive: true,
          errorOnExist: true,
          force: false,
          verbatimSymlinks: true,
        }),
      );
      await onPath(source, () => rm(source, { recursive: true }));
    }
    return { source, destination, type: entryType(info) };
  },
});

/** Deletes one file (or symlink); directories go through delete_directory so recursion is explicit. */
export const deleteFile = defineTool({
  name: 'delete_file',
  description:
    'Delete a file, or a symbolic link (the link itself, never its target). Refuses a directory (use ' +
    'delete_directory for that) and a path ending in "/". Returns {path, deleted, type, size_bytes}.',
  input: z.object({
    path: z.string().describe('File to delete: absolute, or relative to the first allowed directory'),
  }),
  annotations: { title: 'Delete file', readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  async execute(args, ctx) {
    assertFilePath(args.path, 'delete_file');
    const real = await ctx.paths.resolveEntryForWrite(args.path);
    refuseRoot(ctx, real, 'deleted');
    const info = await onPath(real, () => lstat(real));
    if (info.isDirectory()) throw new ToolError(`${real} is a directory; use delete_directory to delete it`);
    await onPath(real, () => unlink(real));
    return { path: real, deleted: true, type: entryType(info), size_bytes: info.size };
  },
});

/** Deletes a directory; a non-empty one only when the model says recursive: true. */
export const deleteDirectory = defineTool({
  name: 'delete_directory',
  description:
    'Delete a directory. A non-empty directory is refused unless recursive is true, which deletes everything ' +
    'in it. Directories holding protected files (.git, keys, secrets) are refused, and so is a symbolic link ' +
    '(remove the link with delete_file). Returns {path, deleted, recursive, removed_entries}.',
  input: z.object({
    path: z.string().describe('Directory to delete: absolute, or relative to the first allowed directory'),
    recursive: z.boolean().optional().describe('Also delete everything inside (default false)'),
  }),
  annotations: {
    title: 'Delete directory',
    readOnlyHint: false,
    destructiveHint: true,
    idempotentHint: false,
  },
  async execute(args, ctx) {
    // The entry itself: a symlink to a directory must not get its target deleted.
    const real = await ctx.paths.resolveEntryForWrite(args.path);
    refuseRoot(ctx, real, 'deleted');
    const info = await onPath(real, () => lstat(real));
    if (info.isSymbolicLink()) {
      throw new ToolError(`${real} is a symbolic link; use delete_file to remove the link`);
    }
    if (!info.isDirectory()) throw new ToolError(`${real} is not a directory; use delete_file to delete it`);
    if (!args.recursive) {
      try {
        await rmdir(real);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw fsError(err, real);
        const entries = (await readDirSorted(real)).length;
        throw new ToolError(
          `${real} is not empty (${entries} entries); pass recursive: true to delete it and everything in it`,
        );
      }
      return { path: real, deleted: true, recursive: false, removed_entries: 0 };
    }
    const removed = await checkSubtree(ctx, real, 'deleted');
    await onPath(real, () => rm(real, { recursive: true }));
    return { path: real, deleted: true, recursive: true, removed_entries: removed };
  },
});
