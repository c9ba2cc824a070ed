import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  statSync,
} from 'node:fs';
import Database from 'better-sqlite3';
import { SqlRefused } from './guard.ts';

// Opening a database file for the query process (layer 4 of guard.ts) and making sure it is the file that
// was checked. The tool-server checks the path (path guard, header) and sends the file's device and inode;
// SQLite then opens it by name, so on Linux the process confirms through /proc/self/fd that the file SQLite
// opened is that very inode, and a directory swapped for a symlink in between cannot redirect the open. A
// WAL-mode file without a -wal file is read into memory instead (walImage), so reading it creates no files.

function changedWhileOpening(): SqlRefused {
  return new SqlRefused(
    'The database file changed while it was being opened (it, or a directory on its path, was moved or ' +
      'replaced); nothing was read, try again',
  );
}

/** A file as the path guard saw it; the query process checks that SQLite opened this one. */
export interface FileIdentity {
  dev: number;
  ino: number;
}

/** Each open descriptor with what it points at, or null where /proc/self/fd does not exist. */
function openDescriptors(): Set<string> | null {
  try {
    return new Set(readdirSync('/proc/self/fd').map((fd) => `${fd} ${target(fd)}`));
  } catch {
    return null;
  }
}

function target(fd: string): string {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return '';
  }
}

/**
 * Refuses unless a descriptor opened since `before` is the expected file (a descriptor number may be reused,
 * e.g. the one readdir itself used, so "new" means a new number or a new target).
 */
function assertOpened(before: Set<string>, expect: FileIdentity): void {
  for (const fd of readdirSync('/proc/self/fd')) {
    if (before.has(`${fd} ${target(fd)}`)) continue;
    try {
      const info = statSync(`/proc/self/fd/${fd}`);
      if (info.dev === expect.dev && info.ino === expect.ino) return;
    } catch {
      // a descriptor closed in the meantime (readdir's own)
    }
  }
  throw changedWhileOpening();
}

/** The largest WAL-mode file read into memory rather than opened in place (see walImage). */
export const IN_MEMORY_MAX_BYTES = 256 * 1024 * 1024;

/**
 * A WAL-mode database with no -wal file beside it, as a memory image; null for any other file. Opened in place,
 * such a file makes even a read-only connection create -wal and -shm files next to it (and it cannot remove
 * them), also in a read-only root. With no -wal file every committed page is in the main file, so an image of it
 * is the database; its header is set to rollback mode, since an in-memory database has no WAL.
 */
function walImage(file: string, expect?: FileIdentity): Buffer | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw changedWhileOpening();
    throw err;
  }
  try {
    const info = fstatSync(fd);
    if (expect && (info.dev !== expect.dev || info.ino !== expect.ino)) throw changedWhileOpening();
    if (info.size < 100 || info.size > IN_MEMORY_MAX_BYTES) return null;
    const head = Buffer.alloc(100);
    readSync(fd, head, 0, head.length, 0);
    // Bytes 18 and 19: the file format write and read versions, 2 in WAL mode.
    if (head[18] !== 2 || head[19] !== 2 || existsSync(`${file}-wal`)) return null;
    const image = Buffer.alloc(info.size);
    for (let at = 0; at < image.length; ) {
      const n = readSync(fd, image, at, image.length - at, at);
      if (n === 0) throw changedWhileOpening();
      at += n;
    }
    image[18] = 1;
    image[19] = 1;
    return image;
  } finally {
    closeSync(fd);
  }
}

/** Layer 4: opens an existing database file read-only, hardened as described above; the caller closes it. */
export function openReadOnly(file: string, busyTimeoutMs: number, expect?: FileIdentity): Database.Database {
  const image = walImage(file, expect);
  const before = expect && !image ? openDescriptors() : null;
  const db = image
    ? new Database(image, { readonly: true })
    : new Database(file, { readonly: true, fileMustExist: true, timeout: busyTimeoutMs });
  try {
    db.unsafeMode(false);
    db.exec('PRAGMA trusted_schema = OFF');
    db.exec('PRAGMA query_only = ON');
    if (before && expect) {
      // SQLite opens the file on first use: read the schema cookie (a header field) to make it do so now.
      db.pragma('schema_version');
      assertOpened(before, expect);
    }
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}
