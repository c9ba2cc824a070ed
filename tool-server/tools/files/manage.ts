import { lstat, readdir, rename, rmdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { using, type VerifiedDir } from '../../guards/paths/fd-path.ts';
import { CHANGES, defineTool, type ToolContext } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { assertFilePath, EntryType, entryType, existing, fsError, onPath } from './common.ts';
import { checkSubtree, moveAcross, removeTree } from './tree.ts';

// The tools that move and delete. They act on an entry itself, never on a final symlink's target. They
// refuse to touch a root, and before a directory is moved or deleted as a whole they check that nothing
// inside it is protected (a .git, a key, another root), and for a move, that nothing lands on a protected path.
// Every rename, unlink and rmdir goes through the verified parent directories (tool-server/guards/paths/fd-path.ts), and subtrees are
// walked through descriptors (tree.ts): a directory swapped for an outward symlink is never followed.

function refuseRoot(ctx: ToolContext, real: string, verb: string): void {
  if (ctx.paths.isRoot(real)) {
    throw new ToolError(`${real} is one of the allowed directories itself; it cannot be ${verb}`);
  }
}

/** Refuses, during a removal, an entry that is protected (it appeared after the subtree check). */
function protectedGuard(ctx: ToolContext, verb: string): (real: string) => void {
  return (real) => {
    const pattern = ctx.paths.blockedPatternFor(real);
    if (pattern) {
      throw new ToolError(`${real} matches the protected pattern "${pattern}"; it cannot be ${verb}`);
    }
  };
}

/** Opens the destination's parent; a missing one gets the message that says to create it. */
async function destinationParent(ctx: ToolContext, destination: string): Promise<VerifiedDir> {
  const parent = path.dirname(destination);
  try {
    return await ctx.paths.openDirectory(parent);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw fsError(err, parent);
    throw new ToolError(`The destination's parent ${parent} is not an existing directory; create it first`);
  }
}

/** The move itself, between two verified directories. */
async function moveEntry(
  ctx: ToolContext,
  move: { from: VerifiedDir; name: string; to: VerifiedDir; toName: string },
): Promise<{ source: string; destination: string; type: EntryType }> {
  const { from, name, to, toName } = move;
  const source = path.join(from.real, name);
  const destination = path.join(to.real, toName);
  const info = await onPath(source, () => lstat(from.entry(name)));
  if (await existing(to, toName)) {
    throw new ToolError(`${destination} already exists; delete it first or choose another destination`);
  }
  // resolveForWrite has checked the destination itself; a directory's entries are checked where they land.
  if (info.isDirectory()) {
    const { dir } = await onPath(source, () => from.child(name));
    await using(dir, (d) => checkSubtree(ctx, d, 'moved', destination));
  }
  try {
    await rename(from.entry(name), to.entry(toName));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw fsError(err, source);
    // Across file systems: copy through descriptors (symlinks as they are, never over anything), then remove.
    await onPath(destination, () => moveAcross(from, name, to, toName, protectedGuard(ctx, 'moved')));
  }
  return { source, destination, type: entryType(info) };
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
  output: z.object({ source: z.string(), destination: z.string(), type: EntryType }),
  annotations: { title: 'Move file', ...CHANGES },
  async execute(args, ctx) {
    const source = await ctx.paths.resolveEntryForWrite(args.source);
    const destination = await ctx.paths.resolveForWrite(args.destination);
    refuseRoot(ctx, source, 'moved');
    if (ctx.paths.isRoot(destination)) {
      throw new ToolError(`${destination} already exists; delete it first or choose another destination`);
    }
    return onPath(source, () =>
      ctx.paths.withParent(source, (from, name) =>
        using(destinationParent(ctx, destination), (to) =>
          moveEntry(ctx, { from, name, to, toName: path.basename(destination) }),
        ),
      ),
    );
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
  output: z.object({ path: z.string(), deleted: z.literal(true), type: EntryType, size_bytes: z.number() }),
  annotations: { title: 'Delete file', ...CHANGES },
  async execute(args, ctx) {
    assertFilePath(args.path, 'delete_file');
    const real = await ctx.paths.resolveEntryForWrite(args.path);
    refuseRoot(ctx, real, 'deleted');
    return onPath(real, () =>
      ctx.paths.withParent(real, async (dir, name) => {
        const info = await lstat(dir.entry(name));
        if (info.isDirectory())
          throw new ToolError(`${real} is a directory; use delete_directory to delete it`);
        await unlink(dir.entry(name));
        return { path: real, deleted: true, type: entryType(info), size_bytes: info.size };
      }),
    );
  },
});

/** delete_directory inside the verified parent: rmdir, or the subtree check and then rm -r. */
async function deleteIn(ctx: ToolContext, parent: VerifiedDir, name: string, args: { recursive?: boolean }) {
  const real = path.join(parent.real, name);
  const info = await lstat(parent.entry(name));
  if (info.isSymbolicLink()) {
    throw new ToolError(`${real} is a symbolic link; use delete_file to remove the link`);
  }
  if (!info.isDirectory()) throw new ToolError(`${real} is not a directory; use delete_file to delete it`);
  if (!args.recursive) {
    try {
      await rmdir(parent.entry(name));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      const { dir } = await parent.child(name);
      const entries = await using(dir, (d) => readdir(d.self));
      throw new ToolError(
        `${real} is not empty (${entries.length} entries); pass recursive: true to delete it and everything in it`,
      );
    }
    return { path: real, deleted: true as const, recursive: false, removed_entries: 0 };
  }
  const { dir } = await parent.child(name);
  const removed = await using(dir, (d) => checkSubtree(ctx, d, 'deleted'));
  await removeTree(parent, name, protectedGuard(ctx, 'deleted'));
  return { path: real, deleted: true as const, recursive: true, removed_entries: removed };
}

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
  output: z.object({
    path: z.string(),
    deleted: z.literal(true),
    recursive: z.boolean(),
    removed_entries: z.number().describe('Entries deleted inside the directory'),
  }),
  annotations: { title: 'Delete directory', ...CHANGES },
  async execute(args, ctx) {
    // The entry itself: a symlink to a directory must not get its target deleted.
    const real = await ctx.paths.resolveEntryForWrite(args.path);
    refuseRoot(ctx, real, 'deleted');
    return onPath(real, () =>
      ctx.paths.withParent(real, (parent, name) => deleteIn(ctx, parent, name, args)),
    );
  },
});
