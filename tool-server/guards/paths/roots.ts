import { mkdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { RootLayout } from './resolve.ts';

// The allowed directories as the path guard holds them: each in the spelling it was configured with and in
// its real one, read-write or read-only, and the one containment test every check uses.

/** One allowed directory. */
export interface Root {
  /** As configured, path.resolve'd: what the model may have typed. */
  lexical: string;
  /** After realpath(): what containment of real paths is checked against. */
  real: string;
  writable: boolean;
}

/** A root that holds a path, and the path relative to it. */
export interface Found {
  root: Root;
  rel: string;
}

/** Component-wise containment, the one test every tool uses: `p` relative to `root` ('' for the root
 * itself), or null when `p` is not inside it. A string-prefix test would admit `/a/project2` for `/a/project`. */
export function relativeInside(root: string, p: string): string | null {
  const rel = path.relative(root, p);
  if (rel === '') return '';
  if (path.isAbsolute(rel)) return null;
  if (rel === '..' || rel.startsWith(`..${path.sep}`)) return null;
  return rel;
}

function errnoCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

/** Realpaths every configured root (creating missing read-write ones), so checks compare real paths. */
export async function loadRoots(readWrite: string[], readOnly: string[]): Promise<Root[]> {
  if (readWrite.length === 0 && readOnly.length === 0) {
    throw new Error('PathGuard needs at least one root directory (FS_ROOTS or FS_READONLY_ROOTS)');
  }
  const roots: Root[] = [];
  for (const [list, writable] of [
    [readWrite, true],
    [readOnly, false],
  ] as const) {
    for (const configured of list) {
      if (typeof configured !== 'string' || configured === '' || configured.includes('\0')) {
        throw new Error(`Invalid root directory: ${JSON.stringify(configured)}`);
      }
      const lexical = path.resolve(configured);
      if (writable) await mkdir(lexical, { recursive: true });
      let real: string;
      try {
        real = await realpath(lexical);
      } catch (err) {
        const why = errnoCode(err) === 'ENOENT' ? 'does not exist' : `cannot be resolved (${errnoCode(err)})`;
        throw new Error(`${writable ? 'Root' : 'Read-only root'} ${lexical} ${why}`);
      }
      if (!(await stat(real)).isDirectory()) throw new Error(`Root ${lexical} is not a directory`);
      roots.push({ lexical, real, writable });
    }
  }
  // A directory listed in both FS_ROOTS and FS_READONLY_ROOTS is read-only, whichever way it is spelt:
  // the safer reading wins. Its read-write entry stays (as read-only) so its configured spelling still works.
  const readOnlyReal = new Set(roots.filter((r) => !r.writable).map((r) => r.real));
  for (const r of roots) if (readOnlyReal.has(r.real)) r.writable = false;
  return roots;
}

/** The longest root holding `p` in one of the spellings `spellings` gives, or undefined when none does. */
export function mostSpecific(
  roots: readonly Root[],
  p: string,
  spellings: (r: Root) => string[],
): Found | undefined {
  let best: (Found & { length: number }) | undefined;
  for (const root of roots) {
    for (const spelling of spellings(root)) {
      const rel = relativeInside(spelling, p);
      if (rel !== null && (!best || spelling.length > best.length))
        best = { root, rel, length: spelling.length };
    }
  }
  return best && { root: best.root, rel: best.rel };
}

/** The roots as tool-server/guards/net/resolve.ts walks them: inside one, exactly one, or on the way to one. */
export function rootLayout(roots: readonly Root[]): RootLayout {
  const spellings = roots.flatMap((r) => [r.lexical, r.real]);
  return {
    inside: (p) => mostSpecific(roots, p, (r) => [r.real]) !== undefined,
    rootAt: (p) => roots.find((r) => r.lexical === p || r.real === p)?.real,
    onTheWay: (p) => spellings.some((s) => relativeInside(p, s) !== null),
  };
}
