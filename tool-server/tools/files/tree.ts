import { constants, type Dirent } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, rmdir, symlink, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { VerifiedDir } from '../../guards/paths/fd-path.ts';
import { relativeInside } from '../../guards/paths/guard.ts';
import type { ToolContext } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { NO_FOLLOW } from './common.ts';

// Whole subtrees: the check before a directory is moved or deleted, rm -r, and the copy a move across file
// systems needs. All of it goes through directory descriptors, opened from their parent without following
// symlinks (tool-server/guards/paths/fd-path.ts), so a directory swapped for an outward symlink midway is refused, never entered.

const CHUNK = 64 * 1024;

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

/** Visits every entry below `dir`, depth first, parents before children; symlinks are visited, not entered. */
async function walk(dir: VerifiedDir, visit: (dir: VerifiedDir, entry: Dirent) => void): Promise<void> {
  for (const entry of await readdir(dir.self, { withFileTypes: true })) {
    visit(dir, entry);
    if (!entry.isDirectory()) continue;
    const { dir: sub } = await dir.child(entry.name);
    try {
      await walk(sub, visit);
    } finally {
      await sub.close();
    }
  }
}

/**
 * Refuses if anything in `dir` is protected or another root, or, given the `destination` of a move, if
 * anything would land on a protected path there; counts the entries.
 */
export async function checkSubtree(
  ctx: ToolContext,
  dir: VerifiedDir,
  verb: string,
  destination?: string,
): Promise<number> {
  const { read_write, read_only } = ctx.paths.allowed();
  for (const root of [...read_write, ...read_only]) {
    const rel = relativeInside(dir.real, root);
    if (rel !== null && rel !== '') {
      throw new ToolError(`${dir.real} contains the allowed directory ${root}; it cannot be ${verb}`);
    }
  }
  let count = 0;
  await walk(dir, (parent, entry) => {
    const full = path.join(parent.real, entry.name);
    const pattern = ctx.paths.blockedPatternFor(full);
    if (pattern) {
      throw new ToolError(
        `${dir.real} contains ${full}, which matches the protected pattern "${pattern}"; it cannot be ${verb}`,
      );
    }
    const landing = destination ? path.join(destination, path.relative(dir.real, full)) : undefined;
    const landingPattern = landing ? ctx.paths.blockedPatternFor(landing) : undefined;
    if (landingPattern) {
      throw new ToolError(
        `${dir.real} contains ${full}, which would become ${landing}, matching the protected pattern ` +
          `"${landingPattern}"; it cannot be ${verb} there`,
      );
    }
    count++;
  });
  return count;
}

/**
 * rm -r of the directory `name` in `parent`, through descriptors. `allowed` is asked about every entry
 * before it goes (a protected file that appeared after the check stops the removal there).
 */
export async function removeTree(
  parent: VerifiedDir,
  name: string,
  allowed: (real: string) => void = () => undefined,
): Promise<void> {
  const { dir } = await parent.child(name);
  try {
    for (const entry of await readdir(dir.self, { withFileTypes: true })) {
      allowed(path.join(dir.real, entry.name));
      if (entry.isDirectory()) {
        await removeTree(dir, entry.name, allowed);
        continue;
      }
      try {
        await unlink(dir.entry(entry.name));
      } catch (err) {
        const code = errnoOf(err);
        if (code !== 'EISDIR' && code !== 'EPERM') throw err;
        // It became a directory after readdir: remove it as one.
        if (!(await lstat(dir.entry(entry.name))).isDirectory()) throw err;
        await removeTree(dir, entry.name, allowed);
      }
    }
  } finally {
    await dir.close();
  }
  await rmdir(parent.entry(name));
}

/** Copies a regular file's bytes, permission bits and times; the copy is created new (O_EXCL). */
async function copyFile(
  from: VerifiedDir,
  name: string,
  to: VerifiedDir,
  toName: string,
  created: () => void,
): Promise<void> {
  const source = await open(from.entry(name), constants.O_RDONLY | constants.O_NONBLOCK | NO_FOLLOW);
  try {
    const info = await source.stat();
    if (!info.isFile()) throw new ToolError(`${path.join(from.real, name)} changed while being moved`);
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NO_FOLLOW;
    const target = await open(to.entry(toName), flags, info.mode & 0o777);
    created();
    try {
      const buffer = Buffer.alloc(CHUNK);
      for (let position = 0; ; ) {
        const { bytesRead } = await source.read(buffer, 0, CHUNK, position);
        if (bytesRead === 0) break;
        await target.write(buffer, 0, bytesRead);
        position += bytesRead;
      }
      await target.utimes(info.atime, info.mtime);
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}

/**
 * Copies the entry `name` of `from` to `toName` in `to`: files with their bytes, symlinks as links (never
 * followed), directories with everything in them. Never over anything; special files are refused. `created`
 * is called once `toName` exists, so a failed copy removes only what it made.
 */
export async function copyEntry(
  from: VerifiedDir,
  name: string,
  to: VerifiedDir,
  toName: string,
  created: () => void = () => undefined,
): Promise<void> {
  const info = await lstat(from.entry(name));
  if (info.isSymbolicLink()) {
    await symlink(await readlink(from.entry(name)), to.entry(toName));
    created();
  } else if (info.isFile()) {
    await copyFile(from, name, to, toName, created);
  } else if (info.isDirectory()) {
    await mkdir(to.entry(toName), info.mode & 0o777);
    created();
    const { dir: source } = await from.child(name);
    try {
      const { dir: target } = await to.child(toName);
      try {
        for (const entry of await readdir(source.self)) await copyEntry(source, entry, target, entry);
      } finally {
        await target.close();
      }
    } finally {
      await source.close();
    }
  } else {
    throw new ToolError(
      `${path.join(from.real, name)} is a special file (device, socket or pipe); it cannot be moved to ` +
        'another file system',
    );
  }
}

/**
 * A move across file systems (rename() said EXDEV): copy through descriptors, then remove the original.
 * If the copy fails, what it made is removed again and the original is left as it was.
 */
export async function moveAcross(
  from: VerifiedDir,
  name: string,
  to: VerifiedDir,
  toName: string,
  allowed: (real: string) => void,
): Promise<void> {
  const isDirectory = (await lstat(from.entry(name))).isDirectory();
  let made = false;
  try {
    await copyEntry(from, name, to, toName, () => {
      made = true;
    });
  } catch (err) {
    if (made && isDirectory) await removeTree(to, toName).catch(() => undefined);
    else if (made) await unlink(to.entry(toName)).catch(() => undefined);
    throw err;
  }
  if (isDirectory) await removeTree(from, name, allowed);
  else await unlink(from.entry(name));
}
