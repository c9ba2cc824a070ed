import { lstat, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';

// The path guard's own realpath(): symlinks are followed one component at a time, and every step is checked
// against the roots *before* anything there is looked at. realpath() would answer ENOENT, ENOTDIR or a target
// for places outside the roots too, and those answers leaked what exists out there; here a step that leaves
// the roots stops the walk with the one "outside" answer, whatever is (or is not) beyond it.

/** Linux's own limit on symlinks followed while resolving one path. */
const MAX_LINKS = 40;

/** Where the roots are: which real paths are inside one, and which are on the way to one. */
export interface RootLayout {
  /** True for a real path inside (or equal to) a root. */
  inside(p: string): boolean;
  /** The real path of the root `p` spells (as configured or real), if it spells one exactly. */
  rootAt(p: string): string | undefined;
  /** True for an ancestor of a root (in either spelling): an absolute link target may pass through it. */
  onTheWay(p: string): boolean;
}

/** Why a path has no real path inside the roots; the guard words each kind as one message. */
export type Unresolvable =
  | { kind: 'outside' }
  | { kind: 'dangling'; link: string }
  | { kind: 'ambiguous'; dir: string; name: string; matches: string[] }
  | { kind: 'errno'; code: string };

/** Thrown by resolveInside; carries only what is safe to tell about paths inside the roots. */
export class ResolveError extends Error {
  readonly reason: Unresolvable;

  constructor(reason: Unresolvable) {
    super(reason.kind);
    this.reason = reason;
    this.name = new.target.name;
  }
}

/** A marker under the components of a link's target: while one is on the stack, a missing entry is dangling. */
interface LinkEnd {
  link: string;
}

type Item = string | LinkEnd;

const hasNonAscii = (s: string) => [...s].some((c) => c.charCodeAt(0) > 0x7f);

/**
 * The one entry of `dir` whose name equals `name` after Unicode normalisation (NFC and NFD spell "é"
 * differently), so a model that typed the other form finds the file instead of creating a look-alike twin.
 */
export async function normalisationTwin(dir: string, name: string): Promise<string | undefined> {
  if (!hasNonAscii(name)) return undefined;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return undefined;
  }
  const wanted = name.normalize('NFC');
  const matches = names.filter((n) => n !== name && n.normalize('NFC') === wanted);
  if (matches.length > 1) throw new ResolveError({ kind: 'ambiguous', dir, name, matches });
  return matches[0];
}

function errnoOf(err: unknown): string {
  return (err as NodeJS.ErrnoException | null)?.code ?? 'EIO';
}

/**
 * The real path of `components` below `start` (a root's real path): symlinks followed, the missing tail of a
 * new path kept. Throws ResolveError: `outside` as soon as a step leaves the roots (nothing outside is ever
 * looked at), `dangling` for a link inside whose target does not exist, `errno` for a failure inside.
 */
export async function resolveInside(start: string, components: string[], roots: RootLayout): Promise<string> {
  const stack: Item[] = [...components].reverse();
  let current = start;
  let transit = false; // current is an ancestor of a root (reached through an absolute link target), not inside
  let links = 0;
  const place = (p: string): void => {
    if (roots.inside(p)) {
      current = p;
      transit = false;
      return;
    }
    const root = roots.rootAt(p);
    if (root !== undefined) {
      current = root;
      transit = false;
    } else if (roots.onTheWay(p)) {
      current = p;
      transit = true;
    } else {
      throw new ResolveError({ kind: 'outside' });
    }
  };
  while (stack.length > 0) {
    const item = stack.pop() as Item;
    if (typeof item !== 'string' || item === '' || item === '.') continue;
    if (item === '..') {
      place(path.dirname(current));
      continue;
    }
    let next = path.join(current, item);
    if (transit) {
      place(next);
      continue;
    }
    let info: Awaited<ReturnType<typeof lstat>>;
    try {
      info = await lstat(next);
    } catch (err) {
      const code = errnoOf(err);
      if (code !== 'ENOENT') throw new ResolveError({ kind: 'errno', code });
      const twin = await normalisationTwin(current, item);
      const inLink = [...stack].reverse().find((i): i is LinkEnd => typeof i !== 'string');
      if (twin === undefined) {
        if (inLink) throw new ResolveError({ kind: 'dangling', link: inLink.link });
        // A new path: the components still to come are plain names (the path was normalised).
        return path.join(next, ...(stack.reverse() as string[]));
      }
      next = path.join(current, twin);
      try {
        info = await lstat(next);
      } catch (again) {
        throw new ResolveError({ kind: 'errno', code: errnoOf(again) });
      }
    }
    if (info.isSymbolicLink()) {
      if (++links > MAX_LINKS) throw new ResolveError({ kind: 'errno', code: 'ELOOP' });
      let target: string;
      try {
        target = await readlink(next);
      } catch (err) {
        throw new ResolveError({ kind: 'errno', code: errnoOf(err) });
      }
      stack.push({ link: next }, ...target.split('/').reverse());
      if (path.isAbsolute(target)) place(path.parse(next).root);
      continue;
    }
    const more = stack.some((i) => typeof i === 'string' && i !== '' && i !== '.');
    if (more && !info.isDirectory()) throw new ResolveError({ kind: 'errno', code: 'ENOTDIR' });
    current = next;
  }
  if (transit) throw new ResolveError({ kind: 'outside' });
  return current;
}
