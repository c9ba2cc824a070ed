import { randomBytes } from 'node:crypto';
import type { Dirent, Stats } from 'node:fs';
import { constants } from 'node:fs';
import { lstat, open, readdir, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import picomatch from 'picomatch';
import { z } from 'zod';
import type { VerifiedDir } from '../../guards/paths/fd-path.ts';
import { ToolError } from '../../kit/errors.ts';

// Helpers shared by the filesystem tools: error translation, entry types, directory reads that never
// follow symlinks, glob matching with the basename rule, and writes that replace a file rather than
// write through whatever link its name is. Entries are reached through a VerifiedDir (tool-server/guards/paths/fd-path.ts), so an
// operation acts inside the directory that was checked even if its path is swapped meanwhile.

/** O_NOFOLLOW where the platform has it: a symlink swapped in after the guard's check fails with ELOOP. */
export const NO_FOLLOW: number = constants.O_NOFOLLOW ?? 0;

/** The hard caps that keep listings, trees and searches a size a model can read. */
export const LIMITS = {
  listEntries: 1000,
  treeNodes: 2000,
  searchVisits: 100_000,
  editBytes: 16 * 1024 * 1024,
  /** 5 MiB: about 6.7 MB of base64, within what model APIs take for one image. */
  mediaBytes: 5 * 1024 * 1024,
};

const FS_MESSAGES: Record<string, (p: string) => string> = {
  ENOENT: (p) => `No such file or directory: ${p}`,
  EISDIR: (p) => `${p} is a directory, not a file`,
  ENOTDIR: (p) => `${p} is not a directory (or one of its parents is a file)`,
  EEXIST: (p) => `${p} already exists`,
  EACCES: (p) => `Permission denied: ${p}`,
  EPERM: (p) => `Operation not permitted: ${p}`,
  ENOTEMPTY: (p) => `Directory not empty: ${p}`,
  ELOOP: (p) => `${p} is a symbolic link (it changed after it was checked); try again`,
  EBUSY: (p) => `${p} is busy (in use or a mount point)`,
  ENOSPC: (p) => `No space left on the device while writing ${p}`,
  EROFS: (p) => `${p} is on a read-only file system`,
  EINVAL: (p) => `Invalid operation on ${p} (for example moving a directory into itself)`,
  ENAMETOOLONG: (p) => `The path is too long: ${p}`,
};

/** Turns a Node fs error into a ToolError naming the path; ToolErrors and unknown errors pass through. */
export function fsError(err: unknown, p: string): unknown {
  if (err instanceof ToolError) return err;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  const message = code ? FS_MESSAGES[code] : undefined;
  return message ? new ToolError(message(p)) : err;
}

/** The text of a failure that is reported inside a result (one file of several, one directory of a walk). */
export function fsMessage(err: unknown, p: string): string {
  const failure = fsError(err, p);
  return failure instanceof Error ? failure.message : String(failure);
}

/** Runs one fs operation and reports its failure in words the model can act on. */
export async function onPath<T>(p: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw fsError(err, p);
  }
}

/** lstat() of `name` in `dir` that answers null when it does not exist yet, to tell "new" from "there". */
export async function existing(dir: VerifiedDir, name: string): Promise<Stats | null> {
  try {
    return await lstat(dir.entry(name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw fsError(err, path.join(dir.real, name));
  }
}

/**
 * Refuses a path spelt as a directory ("notes/", "a/.", ".."): path.resolve() would drop the slash, and
 * write_file {path: "notes/"} would quietly create a file named notes.
 */
export function assertFilePath(p: string, tool: string): void {
  if (typeof p !== 'string' || p.trim() === '') return; // the path guard explains that one
  const last = p.slice(Math.max(p.lastIndexOf('/'), p.lastIndexOf(path.sep)) + 1);
  if (last === '' || last === '.' || last === '..') {
    const why = last === '' ? 'ends with a slash, so it names a directory' : 'names a directory';
    throw new ToolError(`${JSON.stringify(p)} ${why}; ${tool} needs the path of a file`);
  }
}

/** What a directory entry is, without following symlinks. */
export const EntryType = z.enum(['file', 'directory', 'symlink', 'other']);
export type EntryType = z.infer<typeof EntryType>;

/** A time as the file tools return it (see iso). */
export const IsoTime = z
  .string()
  .nullable()
  .describe('ISO 8601 time; null where the platform does not record it');

/** Classifies a Dirent or an lstat() result the same way everywhere. */
export function entryType(e: Dirent | Stats): EntryType {
  if (e.isSymbolicLink()) return 'symlink';
  if (e.isDirectory()) return 'directory';
  if (e.isFile()) return 'file';
  return 'other';
}

/** A directory's entries sorted by name; readdir never follows the entries' symlinks. */
export async function readDirSorted(dir: VerifiedDir): Promise<Dirent[]> {
  const entries = await onPath(dir.real, () => readdir(dir.self, { withFileTypes: true }));
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** A glob test over paths relative to a walk's start; a pattern without '/' matches basenames anywhere. */
export function globMatcher(patterns: readonly string[]): (rel: string) => boolean {
  const tests = patterns.map((pattern) => {
    const test = picomatch(pattern, { dot: true });
    return pattern.includes('/') ? test : (rel: string) => test(rel.slice(rel.lastIndexOf('/') + 1));
  });
  return (rel) => tests.some((t) => t(rel));
}

/** Joins a walk-relative path with '/', whatever the platform, so globs and results look the same. */
export function relJoin(parent: string, name: string): string {
  return parent === '' ? name : `${parent}/${name}`;
}

/** ISO time of a Stats field, or null when the platform does not record it. */
export function iso(date: Date): string | null {
  return Number.isNaN(date.getTime()) || date.getTime() === 0 ? null : date.toISOString();
}

/**
 * Writes a whole file `name` in `dir` through a temp file there renamed over it. rename() replaces the
 * directory entry, so a symlink swapped in after the guard's check, or a hard link to an inode outside the
 * roots, is replaced and never written through; readers see the old or the new content, never half of it.
 * `mode` keeps an existing file's permission bits (not setuid/setgid/sticky, and the owner becomes ours).
 */
export async function writeReplacing(
  dir: VerifiedDir,
  name: string,
  content: string | Uint8Array,
  mode?: number,
): Promise<void> {
  const real = path.join(dir.real, name);
  const temp = dir.entry(`.toolshift-${randomBytes(8).toString('hex')}.tmp`);
  let created = false;
  try {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NO_FOLLOW;
    const handle = await open(temp, flags, 0o666);
    created = true;
    try {
      await handle.writeFile(content);
      if (mode !== undefined) await handle.chmod(mode & 0o777);
    } finally {
      await handle.close();
    }
    await rename(temp, dir.entry(name));
  } catch (err) {
    if (created) await unlink(temp).catch(() => undefined);
    throw fsError(err, real);
  }
}

/** Counts lines the way editors do: a final line without a newline still counts, '' has none. */
export function countLines(text: string): number {
  if (text === '') return 0;
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return text.endsWith('\n') ? n : n + 1;
}
