import { lstat, mkdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import picomatch from 'picomatch';
import { ToolError } from './tools/define.ts';

// Every filesystem tool goes through this guard: a path is checked as written, then again after
// realpath(), against roots that were themselves realpath'ed at startup. The two CVEs of the reference
// MCP filesystem server came from a string-prefix containment test and from a swallowed realpath error,
// so containment here is component-wise and only ENOENT gets the walk-up fallback.

/** The roots a tool-server may touch, from config (`FS_ROOTS`, `FS_READONLY_ROOTS`). */
export interface PathGuardOptions {
  roots: string[];
  readOnlyRoots: string[];
  blockedPatterns?: string[];
}

/** Globs (relative to a root) that no tool may write, so a model cannot touch VCS data, deps or secrets. */
export const DEFAULT_BLOCKED_PATTERNS: readonly string[] = [
  '**/.git/**',
  '**/node_modules/**',
  '**/.ssh/**',
  '**/.aws/**',
  '**/.gnupg/**',
  '**/.env*',
  '**/.git-credentials',
  '**/.pgpass',
  '**/.docker/config.json',
  '**/.kube/**',
  '**/*.pem',
  '**/*.key',
  '**/*.p12',
  '**/*.pfx',
  '**/id_rsa*',
  '**/id_dsa*',
  '**/id_ecdsa*',
  '**/id_ed25519*',
  '**/credentials*.json',
  '**/.npmrc',
  '**/.netrc',
  '**/.pypirc',
  '**/secrets.yaml',
  '**/secrets.yml',
];

type Mode = 'read' | 'write';

const UNRESOLVABLE: Record<string, string> = {
  ELOOP: 'too many levels of symbolic links',
  EACCES: 'permission denied on a parent directory',
  ENOTDIR: 'a component of the path is a file, not a directory',
  ENAMETOOLONG: 'the path is too long',
};

interface Root {
  /** As configured, path.resolve'd: what the model may have typed. */
  lexical: string;
  /** After realpath(): what containment of real paths is checked against. */
  real: string;
  writable: boolean;
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

/** Decides which paths the filesystem tools may read and write, and hands back the real path to use. */
export class PathGuard {
  private readonly roots: Root[];
  private readonly matchers: { pattern: string; test: (p: string) => boolean }[];

  private constructor(roots: Root[], patterns: readonly string[]) {
    this.roots = roots;
    this.matchers = patterns.map((pattern) => ({
      pattern,
      test: picomatch(pattern, { dot: true, nocase: true }),
    }));
  }

  /** Realpaths every root (creating missing read-write ones) so later checks compare real paths. */
  static async create(opts: PathGuardOptions): Promise<PathGuard> {
    if (opts.roots.length === 0 && opts.readOnlyRoots.length === 0) {
      throw new Error('PathGuard needs at least one root directory (FS_ROOTS or FS_READONLY_ROOTS)');
    }
    const roots: Root[] = [];
    for (const [list, writable] of [
      [opts.roots, true],
      [opts.readOnlyRoots, false],
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
          const why =
            errnoCode(err) === 'ENOENT' ? 'does not exist' : `cannot be resolved (${errnoCode(err)})`;
          throw new Error(`${writable ? 'Root' : 'Read-only root'} ${lexical} ${why}`);
        }
        if (!(await stat(real)).isDirectory()) throw new Error(`Root ${lexical} is not a directory`);
        roots.push({ lexical, real, writable });
      }
    }
    // A directory listed in both FS_ROOTS and FS_READONLY_ROOTS is read-only, whichever way it is spelt:
    // the safer reading wins. Its read-write entry stays (as read-only) so its configured spelling still works.
    const readOnly = new Set(roots.filter((r) => !r.writable).map((r) => r.real));
    for (const r of roots) if (readOnly.has(r.real)) r.writable = false;
    return new PathGuard(roots, opts.blockedPatterns ?? DEFAULT_BLOCKED_PATTERNS);
  }

  /** The real absolute path to read, or a ToolError naming the allowed directories. */
  resolveForRead(p: string): Promise<string> {
    return this.resolve(p, 'read');
  }

  /** The real absolute path to create, modify, delete or move, or a ToolError saying why not. */
  resolveForWrite(p: string): Promise<string> {
    return this.resolve(p, 'write');
  }

  /**
   * The entry `p` names itself, with its parent directories resolved but not a final symlink: what
   * delete_file and move_file act on, so removing a link removes the link and never its target.
   */
  async resolveEntryForWrite(p: string): Promise<string> {
    const abs = this.absolute(p);
    if (this.isRoot(abs)) return abs;
    const entry = path.join(await this.resolveForWrite(path.dirname(abs)), path.basename(abs));
    const pattern = this.blockedPatternFor(entry);
    if (pattern) throw this.protectedPath(abs, pattern);
    return entry;
  }

  /** True for a root itself, which tools refuse to delete or move. */
  isRoot(realPath: string): boolean {
    return this.roots.some((r) => r.real === realPath || r.lexical === realPath);
  }

  /** The roots as the model should see them (real paths). */
  allowed(): { read_write: string[]; read_only: string[] } {
    const reals = (writable: boolean) => [
      ...new Set(this.roots.filter((r) => r.writable === writable).map((r) => r.real)),
    ];
    return { read_write: reals(true), read_only: reals(false) };
  }

  /** The blocked pattern a real path inside a root matches, if any; lets tools check every entry of a
   * subtree before a recursive delete or move. */
  blockedPatternFor(realPath: string): string | undefined {
    const root = this.mostSpecific(realPath, (r) => [r.real]);
    if (!root) return undefined;
    return this.blocked(relativeInside(root.root.real, realPath) ?? '');
  }

  /** The absolute path `p` names before symlinks are resolved (relative to the first root). */
  absolute(p: unknown): string {
    if (typeof p !== 'string' || p.trim() === '') throw new ToolError('A path must be a non-empty string');
    if (p.includes('\0')) throw new ToolError('Access denied: the path contains a NUL byte');
    const base = (this.roots.find((r) => r.writable) ?? this.roots[0]).real;
    return path.resolve(base, p);
  }

  private async resolve(p: string, mode: Mode): Promise<string> {
    const abs = this.absolute(p);
    // 1. As written: the longest root that contains the path, by its configured or its real spelling.
    const lexical = this.mostSpecific(abs, (r) => [r.lexical, r.real]);
    if (!lexical) throw this.outside(abs);
    // 2. As it really is: every symlink resolved, the missing tail of a new path re-appended.
    const real = await this.realpathAllowingMissing(abs);
    const actual = this.mostSpecific(real, (r) => [r.real]);
    if (!actual) throw this.outside(abs, real);
    if (mode === 'write') {
      for (const found of [lexical, actual]) {
        if (!found.root.writable) {
          const shown = real === abs ? abs : `${abs} (really ${real})`;
          throw new ToolError(
            `Access denied: ${shown} is in the read-only directory ${found.root.real}; ` +
              `writes are allowed only under: ${this.list(true)}`,
          );
        }
        const pattern = this.blocked(found.rel);
        if (pattern) throw this.protectedPath(abs, pattern);
      }
    }
    return real;
  }

  /** realpath(); on ENOENT only, the nearest existing ancestor's realpath plus the missing components. */
  private async realpathAllowingMissing(abs: string): Promise<string> {
    try {
      return await realpath(abs);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw this.unresolvable(abs, err);
    }
    const missing: string[] = [];
    let current = abs;
    for (;;) {
      try {
        await lstat(current);
        // It exists, yet realpath() said ENOENT: a dangling symlink, which could later point anywhere.
        throw new ToolError(
          `Access denied: ${current} is a symbolic link whose target does not exist; it cannot be used`,
        );
      } catch (err) {
        if (err instanceof ToolError) throw err;
        if (errnoCode(err) !== 'ENOENT') throw this.unresolvable(abs, err);
      }
      missing.unshift(path.basename(current));
      const parent = path.dirname(current);
      if (parent === current) throw this.unresolvable(abs, new Error('no existing ancestor'));
      current = parent;
      try {
        return path.join(await realpath(current), ...missing);
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT') throw this.unresolvable(abs, err);
      }
    }
  }

  private mostSpecific(p: string, spellings: (r: Root) => string[]): { root: Root; rel: string } | undefined {
    let best: { root: Root; rel: string; length: number } | undefined;
    for (const root of this.roots) {
      for (const spelling of spellings(root)) {
        const rel = relativeInside(spelling, p);
        if (rel !== null && (!best || spelling.length > best.length))
          best = { root, rel, length: spelling.length };
      }
    }
    return best && { root: best.root, rel: best.rel };
  }

  private blocked(rel: string): string | undefined {
    if (rel === '') return undefined;
    const posix = rel.split(path.sep).join('/');
    return this.matchers.find((m) => m.test(posix))?.pattern;
  }

  /** The one wording of "this path is protected", for resolve() and resolveEntryForWrite(). */
  private protectedPath(abs: string, pattern: string): ToolError {
    return new ToolError(
      `Access denied: ${abs} matches the protected pattern "${pattern}"; ` +
        'files like this (version control, dependencies, keys and secrets) cannot be modified',
    );
  }

  private list(writableOnly: boolean): string {
    const { read_write, read_only } = this.allowed();
    const rw = read_write.length > 0 ? read_write.join(', ') : 'none';
    if (writableOnly) return rw;
    return `read-write: ${rw}; read-only: ${read_only.length > 0 ? read_only.join(', ') : 'none'}`;
  }

  private outside(abs: string, real?: string): ToolError {
    const shown = real && real !== abs ? `${abs} (which resolves to ${real})` : abs;
    return new ToolError(`Access denied: ${shown} is outside the allowed directories (${this.list(false)})`);
  }

  private unresolvable(abs: string, err: unknown): ToolError {
    const code = errnoCode(err);
    const why = (code && UNRESOLVABLE[code]) ?? code ?? (err as Error).message;
    return new ToolError(`Access denied: ${abs} cannot be resolved safely: ${why}`);
  }
}
