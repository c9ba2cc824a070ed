import { constants, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import type { ToolContext } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { fsMessage, iso, NO_FOLLOW, onPath } from '../files/common.ts';
import { listChecked } from '../files/dirs.ts';

// Finding SQLite files under the roots, and checking that a file the model names is one, before a query
// process is asked to open it. A SQLite file is told by its first 16 bytes, whatever its name.

/** The first 16 bytes of every SQLite 3 database file. */
export const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Names SQLite files usually have; a file with one of them and no bytes yet is an empty database. */
export const DB_EXTENSIONS: readonly string[] = ['.db', '.sqlite', '.sqlite3', '.db3', '.s3db', '.sl3'];

/** Bounds of list_databases' walk; directories that never hold a model's databases are skipped. */
export const FIND_LIMITS = { visits: 20_000, depth: 12, skipDirs: ['.git', 'node_modules'] } as const;

/** What a file is, by its header: SQLite, empty (0 bytes), or something else. */
export type FileKind = 'sqlite' | 'empty' | 'other';

/** Reads the first 16 bytes of a checked regular file (without following a final symlink) and classifies it. */
export async function fileKind(ctx: ToolContext, real: string, info: Stats): Promise<FileKind> {
  if (info.size === 0) return 'empty';
  if (info.size < SQLITE_HEADER.length) return 'other';
  const head = Buffer.alloc(SQLITE_HEADER.length);
  await ctx.paths.withParent(real, async (dir, name) => {
    const handle = await open(dir.entry(name), constants.O_RDONLY | NO_FOLLOW | constants.O_NONBLOCK);
    try {
      await handle.read(head, 0, head.length, 0);
    } finally {
      await handle.close();
    }
  });
  return head.equals(SQLITE_HEADER) ? 'sqlite' : 'other';
}

/** The identity of a database file as checked: the query process confirms it opened this very file. */
export interface CheckedDatabase {
  real: string;
  dev: number;
  ino: number;
  size: number;
}

/** Resolves `p` for reading and insists it is a SQLite database (or an empty file, which SQLite reads as one). */
export async function databaseFile(ctx: ToolContext, p: string): Promise<CheckedDatabase> {
  const real = await ctx.paths.resolveForRead(p);
  const info = await onPath(real, () => ctx.paths.lstatEntry(real));
  if (info.isDirectory()) {
    throw new ToolError(
      `${real} is a directory, not a database file; list_databases finds the SQLite files in it`,
    );
  }
  if (!info.isFile()) throw new ToolError(`${real} is not a regular file, so it cannot be a database`);
  const kind = await onPath(real, () => fileKind(ctx, real, info));
  if (kind === 'other') {
    throw new ToolError(
      `${real} is not a SQLite database: it does not start with the 16-byte header "SQLite format 3\\0"; ` +
        'list_databases finds the SQLite files under the allowed directories',
    );
  }
  return { real, dev: info.dev, ino: info.ino, size: info.size };
}

/** One database list_databases found. */
export interface FoundDatabase {
  path: string;
  size_bytes: number;
  modified: string | null;
  /** A 0-byte file with a database extension: SQLite reads it as a database with no tables. */
  empty?: true;
}

/** Walks `starts` depth-first in name order, without following symlinks, and collects SQLite files. */
export async function findDatabases(ctx: ToolContext, starts: string[], maxResults: number) {
  const found: FoundDatabase[] = [];
  const seen = new Set<string>();
  const errors: { path: string; error: string }[] = [];
  let visits = 0;
  let truncated = false;

  const visit = async (dir: string, depth: number): Promise<void> => {
    let entries: Awaited<ReturnType<typeof listChecked>>;
    try {
      entries = await listChecked(ctx, dir);
    } catch (err) {
      if (errors.length < 20) errors.push({ path: dir, error: fsMessage(err, dir) });
      return;
    }
    for (const entry of entries) {
      if (truncated) return;
      if (++visits > FIND_LIMITS.visits || found.length >= maxResults) {
        truncated = true;
        return;
      }
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        const skip = (FIND_LIMITS.skipDirs as readonly string[]).includes(entry.name);
        if (!skip && depth < FIND_LIMITS.depth) await visit(full, depth + 1);
        continue;
      }
      if (!entry.isFile() || seen.has(full)) continue;
      try {
        const info = await ctx.paths.lstatEntry(full);
        if (!info.isFile()) continue;
        const kind = await fileKind(ctx, full, info);
        const named = DB_EXTENSIONS.includes(path.extname(entry.name).toLowerCase());
        if (kind === 'sqlite' || (kind === 'empty' && named)) {
          seen.add(full);
          found.push({
            path: full,
            size_bytes: info.size,
            modified: iso(info.mtime),
            ...(kind === 'empty' ? { empty: true as const } : {}),
          });
        }
      } catch (err) {
        if (errors.length < 20) errors.push({ path: full, error: fsMessage(err, full) });
      }
    }
  };

  for (const start of starts) {
    if (truncated) break;
    await visit(start, 0);
  }
  return { found, truncated, visits: Math.min(visits, FIND_LIMITS.visits), errors };
}
