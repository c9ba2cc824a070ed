import { constants, type Stats } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, readlink } from 'node:fs/promises';
import path from 'node:path';
import { ToolError } from '../../kit/errors.ts';

// Acting on what was checked. The path guard decides on a real path; between that check and the operation an
// outside process could swap a directory on it for a symlink that leads out of the roots. So on Linux the
// file tools open the directory they work in, confirm through /proc/self/fd/N that the descriptor is the
// directory that was checked, and then create, open, rename and delete through /proc/self/fd/N/<name>: the
// kernel resolves that against the open directory itself, never against its name, so a swap can no longer
// redirect anything. Subdirectories are opened from their parent's descriptor with O_NOFOLLOW|O_DIRECTORY.
// Without /proc (macOS, BSDs, Windows) the same calls take plain paths: no protection against outside
// processes there (the README says so), and the file tools serialise their own writes instead.

const O_DIRECTORY: number = constants.O_DIRECTORY ?? 0;
const O_NOFOLLOW: number = constants.O_NOFOLLOW ?? 0;
const DIR_FLAGS = constants.O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

/** The error for a directory that is no longer the one checked; nothing was done through it. */
function changed(real: string): ToolError {
  return new ToolError(
    `${real} changed while it was being used (a directory on its path was moved, deleted or replaced); ` +
      'nothing was done, try again',
  );
}

/** The one name check for `entry()`: a single component, so no path can climb out of the directory. */
function assertName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new ToolError(`Invalid file name ${JSON.stringify(name)}`);
  }
}

/** True where /proc/self/fd/N names an open directory by its real path: the race-free mode is available. */
export async function procFdWorks(realDir: string): Promise<boolean> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(realDir, DIR_FLAGS);
    return (await readlink(`/proc/self/fd/${handle.fd}`)) === realDir;
  } catch {
    return false;
  } finally {
    await handle?.close();
  }
}

/** A directory inside the roots, held open (with /proc) so names inside it resolve against it, not its path. */
export class VerifiedDir {
  /** The real path it had when it was checked and opened. */
  readonly real: string;
  private readonly handle: FileHandle | null;

  private constructor(real: string, handle: FileHandle | null) {
    this.real = real;
    this.handle = handle;
  }

  /**
   * Opens the directory at `real` (a path the guard has checked) and, with `verify`, confirms the descriptor
   * is that directory now: /proc/self/fd/N must read back exactly `real`, which it cannot once any directory
   * on the way is a symlink, was moved or was deleted.
   */
  static async open(real: string, verify: boolean): Promise<VerifiedDir> {
    if (!verify) {
      const info = await lstat(real);
      if (!info.isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
      return new VerifiedDir(real, null);
    }
    let handle: FileHandle;
    try {
      handle = await open(real, DIR_FLAGS);
    } catch (err) {
      // O_NOFOLLOW|O_DIRECTORY on a symlink fails with ENOTDIR (or ELOOP): one was swapped in since the check
      // (and may be gone again by now). Only a file that is there now is reported as "not a directory".
      const code = errnoOf(err);
      if (code !== 'ENOTDIR' && code !== 'ELOOP') throw err;
      const now = await lstat(real).catch(() => null);
      if (now && !now.isDirectory() && !now.isSymbolicLink()) throw err;
      throw changed(real);
    }
    let actual: string;
    try {
      actual = await readlink(`/proc/self/fd/${handle.fd}`);
    } catch (err) {
      await handle.close();
      throw err;
    }
    if (actual !== real) {
      await handle.close();
      throw changed(real);
    }
    return new VerifiedDir(real, handle);
  }

  /** True when operations go through the descriptor (race-free); false on platforms without /proc. */
  get pinned(): boolean {
    return this.handle !== null;
  }

  /** The path of `name` inside this directory, resolved against the open directory on Linux. */
  entry(name: string): string {
    assertName(name);
    return this.handle ? `/proc/self/fd/${this.handle.fd}/${name}` : path.join(this.real, name);
  }

  /** The path of this directory itself, for readdir(). */
  get self(): string {
    return this.handle ? `/proc/self/fd/${this.handle.fd}` : this.real;
  }

  /** The directory's own metadata. */
  stat(): Promise<Stats> {
    return this.handle ? this.handle.stat() : lstat(this.real);
  }

  /** The open descriptor (null without /proc): handed to a child process, which sees the same directory. */
  get descriptor(): number | null {
    return this.handle ? this.handle.fd : null;
  }

  /** Its change time in nanoseconds: any entry created, removed or renamed in it moves this (see tool-server/tools/git/pin.ts). */
  async changeTime(): Promise<bigint> {
    const info = this.handle
      ? await this.handle.stat({ bigint: true })
      : await lstat(this.real, { bigint: true });
    return info.ctimeNs;
  }

  /**
   * Opens the subdirectory `name` without following a symlink there; with `create`, makes it first when it is
   * missing (mkdir -p, one component at a time). A symlink in its place means the tree changed: refused.
   */
  async child(name: string, create = false): Promise<{ dir: VerifiedDir; created: boolean }> {
    const at = this.entry(name);
    const real = path.join(this.real, name);
    let created = false;
    if (create) {
      try {
        await mkdir(at);
        created = true;
      } catch (err) {
        if (errnoOf(err) !== 'EEXIST') throw err;
      }
    }
    if (!this.handle) {
      const info = await lstat(at);
      if (info.isSymbolicLink()) throw changed(real);
      if (!info.isDirectory()) throw new ToolError(`${real} already exists and is not a directory`);
      return { dir: new VerifiedDir(real, null), created };
    }
    try {
      return { dir: new VerifiedDir(real, await open(at, DIR_FLAGS)), created };
    } catch (err) {
      if (errnoOf(err) !== 'ENOTDIR' && errnoOf(err) !== 'ELOOP') throw err;
      const info = await lstat(at).catch(() => null);
      if (info && !info.isSymbolicLink() && !info.isDirectory()) {
        throw new ToolError(`${real} already exists and is not a directory`);
      }
      throw changed(real);
    }
  }

  /** Lets the descriptor go; every VerifiedDir is closed by whoever opened it. */
  async close(): Promise<void> {
    await this.handle?.close();
  }
}

/**
 * The directories from `root` (a root's real path) down through `rel`, each opened from its parent's descriptor
 * without following symlinks, so every one is the entry of that name in the one above it when it was opened.
 */
export async function openChain(root: string, rel: string, verify: boolean): Promise<VerifiedDir[]> {
  const dirs = [await VerifiedDir.open(root, verify)];
  try {
    for (const name of rel === '' ? [] : rel.split(path.sep)) {
      dirs.push((await dirs[dirs.length - 1].child(name)).dir);
    }
  } catch (err) {
    await Promise.all(dirs.map((d) => d.close()));
    throw err;
  }
  return dirs;
}

/** Runs `fn` with `dir` and closes it afterwards, whatever happens. */
export async function using<T>(
  dir: VerifiedDir | Promise<VerifiedDir>,
  fn: (dir: VerifiedDir) => Promise<T>,
): Promise<T> {
  const opened = await dir;
  try {
    return await fn(opened);
  } finally {
    await opened.close();
  }
}
