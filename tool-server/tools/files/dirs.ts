import type { Dirent } from 'node:fs';
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { using, type VerifiedDir } from '../../guards/paths/fd-path.ts';
import { ADDS, defineTool, READ_ONLY, type ToolContext } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { EntryType, entryType, fsMessage, IsoTime, iso, LIMITS, onPath, readDirSorted } from './common.ts';

// The tools that create and list directories, and the one that tells the model where it may work. Listings
// show an entry's name and type (a symlink as "symlink"), never where a link points.

/** Resolves `p` for reading and insists it is a directory, pointing the model at the right tool if not. */
export async function readableDirectory(ctx: ToolContext, p: string): Promise<string> {
  const real = await ctx.paths.resolveForRead(p);
  const info = await onPath(real, () => ctx.paths.lstatEntry(real));
  if (info.isSymbolicLink()) {
    throw new ToolError(`${real} is a symbolic link (it changed after it was checked); try again`);
  }
  if (!info.isDirectory())
    throw new ToolError(`${real} is a file, not a directory; use read_text_file or get_file_info`);
  return real;
}

/** The sorted entries of the checked directory at `real`, read through its verified descriptor. */
export function listChecked(ctx: ToolContext, real: string): Promise<Dirent[]> {
  return onPath(real, () => using(ctx.paths.openDirectory(real), readDirSorted));
}

/** mkdir -p inside a read-write root; says whether it was already there. */
export const createDirectory = defineTool({
  name: 'create_directory',
  description:
    'Create a directory, including any missing parents (like mkdir -p). Succeeds if it already exists. ' +
    'Returns {path, action: "created"|"already_existed"}.',
  input: z.object({
    path: z.string().describe('Directory to create: absolute, or relative to the first allowed directory'),
  }),
  output: z.object({ path: z.string(), action: z.enum(['created', 'already_existed']) }),
  annotations: { title: 'Create directory', ...ADDS },
  async execute(args, ctx) {
    const real = await ctx.paths.resolveForWrite(args.path);
    // From the root down, one verified directory at a time: a component swapped for a symlink is refused.
    const { dir, created } = await onPath(real, () => ctx.paths.makeDirectory(real));
    await dir.close();
    return { path: real, action: created ? ('created' as const) : ('already_existed' as const) };
  },
});

/** One directory's entries by name and type, capped, symlinks shown as such. */
export const listDirectory = defineTool({
  name: 'list_directory',
  description:
    'List the entries of one directory (not recursive), sorted by name. Returns {path, entries: [{name, type}], ' +
    `total_entries, truncated}; type is file, directory, symlink or other. At most ${LIMITS.listEntries} entries.`,
  input: z.object({
    path: z.string().describe('Directory to list: absolute, or relative to the first allowed directory'),
  }),
  output: z.object({
    path: z.string(),
    entries: z.array(z.object({ name: z.string(), type: EntryType })),
    total_entries: z.number().describe('Entries in the directory, listed or not'),
    truncated: z.boolean(),
  }),
  annotations: { title: 'List directory', ...READ_ONLY },
  async execute(args, ctx) {
    const real = await readableDirectory(ctx, args.path);
    const entries = await listChecked(ctx, real);
    return {
      path: real,
      entries: entries.slice(0, LIMITS.listEntries).map((e) => ({ name: e.name, type: entryType(e) })),
      total_entries: entries.length,
      truncated: entries.length > LIMITS.listEntries,
    };
  },
});

const SizedEntry = z.object({
  name: z.string(),
  type: EntryType,
  size_bytes: z.number().nullable().describe('Files only'),
  modified: IsoTime,
  error: z.string().optional().describe('Why the entry could not be examined'),
});
type SizedEntry = z.infer<typeof SizedEntry>;

/** Every entry of `dir` with its size and time, lstat'ed through the directory's descriptor. */
async function sizedEntries(dir: VerifiedDir): Promise<SizedEntry[]> {
  const dirents = await readDirSorted(dir);
  const entries: SizedEntry[] = [];
  for (let i = 0; i < dirents.length; i += 64) {
    const batch = dirents.slice(i, i + 64).map(async (e): Promise<SizedEntry> => {
      try {
        const info = await lstat(dir.entry(e.name));
        const type = entryType(info);
        return {
          name: e.name,
          type,
          size_bytes: type === 'file' ? info.size : null,
          modified: iso(info.mtime),
        };
      } catch (err) {
        const error = fsMessage(err, path.join(dir.real, e.name));
        return { name: e.name, type: entryType(e), size_bytes: null, modified: null, error };
      }
    });
    entries.push(...(await Promise.all(batch)));
  }
  return entries;
}

/** One directory's entries with sizes and times, sortable by size, with totals: for finding what is big. */
export const listDirectoryWithSizes = defineTool({
  name: 'list_directory_with_sizes',
  description:
    'List the entries of one directory with sizes and modification times. sort_by "name" (default) or "size" ' +
    '(largest first). Returns {path, entries: [{name, type, size_bytes, modified}], totals: {files, ' +
    'directories, symlinks, other, size_bytes}, total_entries, truncated}. size_bytes is given for files only ' +
    `and is not recursive. At most ${LIMITS.listEntries} entries are listed; totals count all of them.`,
  input: z.object({
    path: z.string().describe('Directory to list: absolute, or relative to the first allowed directory'),
    sort_by: z.enum(['name', 'size']).optional().describe('Order: "name" (default) or "size", largest first'),
  }),
  output: z.object({
    path: z.string(),
    entries: z.array(SizedEntry),
    totals: z
      .object({
        files: z.number(),
        directories: z.number(),
        symlinks: z.number(),
        other: z.number(),
        size_bytes: z.number(),
      })
      .describe('Over all entries, listed or not'),
    total_entries: z.number(),
    truncated: z.boolean(),
  }),
  annotations: { title: 'List directory with sizes', ...READ_ONLY },
  async execute(args, ctx) {
    const real = await readableDirectory(ctx, args.path);
    const entries = await onPath(real, () =>
      using(ctx.paths.openDirectory(real), (dir) => sizedEntries(dir)),
    );
    if (args.sort_by === 'size') {
      entries.sort((a, b) => (b.size_bytes ?? -1) - (a.size_bytes ?? -1) || (a.name < b.name ? -1 : 1));
    }
    const totals = { files: 0, directories: 0, symlinks: 0, other: 0, size_bytes: 0 };
    for (const e of entries) {
      if (e.type === 'file') totals.files++;
      else if (e.type === 'directory') totals.directories++;
      else if (e.type === 'symlink') totals.symlinks++;
      else totals.other++;
      totals.size_bytes += e.size_bytes ?? 0;
    }
    return {
      path: real,
      entries: entries.slice(0, LIMITS.listEntries),
      totals,
      total_entries: entries.length,
      truncated: entries.length > LIMITS.listEntries,
    };
  },
});

/** The roots, so the model knows where it may read and write before it guesses a path. */
export const listAllowedDirectories = defineTool({
  name: 'list_allowed_directories',
  description:
    'List the directories the file tools may access: {read_write: [...], read_only: [...]}. Relative paths ' +
    'are resolved against the first read-write directory.',
  input: z.object({}),
  output: z.object({ read_write: z.array(z.string()), read_only: z.array(z.string()) }),
  annotations: { title: 'List allowed directories', ...READ_ONLY },
  async execute(_args, ctx) {
    return ctx.paths.allowed();
  },
});
