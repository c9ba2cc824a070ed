import type { Stats } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { ToolError } from '../../kit/errors.ts';
import { BlockedPatterns, DEFAULT_BLOCKED_PATTERNS, ProtectedPaths } from './blocked.ts';
import { openChain, procFdWorks, using, VerifiedDir } from './fd-path.ts';
import { OutsideRootsError, protectedRefusal, unresolvableRefusal } from './refusals.ts';
import { normalisationTwin, ResolveError, type RootLayout, resolveInside } from './resolve.ts';
import { type Found, loadRoots, mostSpecific, type Root, relativeInside, rootLayout } from './roots.ts';
import { RwLock } from './rw-lock.ts';

// Every filesystem tool goes through this guard: a path is checked as written, then resolved symlink by
// symlink (tool-server/guards/net/resolve.ts) against roots that were themselves realpath'ed at startup. The two CVEs of the
// reference MCP filesystem server came from a string-prefix containment test and from a swallowed realpath
// error, so containment here is component-wise and only ENOENT ends a walk with a new path. Tools then act
// through directories opened and verified here (fd-path.ts), so what they touch is what was checked.

/** The roots a tool-server may touch, from config (`FS_ROOTS`, `FS_READONLY_ROOTS`). */
export interface PathGuardOptions {
  roots: string[];
  readOnlyRoots: string[];
  blockedPatterns?: string[];
  /**
   * Absolute paths (toolshift's installation, toolsets, prompts, policy, .env, data) no tool may write where a
   * root covers them; a root configured inside one of them stays writable.
   */
  protectedPaths?: string[];
  /**
   * The directory of the running installation (its package.json, sources, node_modules): read-only to every
   * tool where a root covers it, except roots configured inside it (`FS_ROOTS=.:./workspace` in a clone).
   */
  installation?: string;
  /**
   * Files no tool may read or write at all, wherever they are (toolshift's credentials file): a model that
   * read them could send the tokens out through a search query or a URL.
   */
  secretPaths?: string[];
  /** What `~` expands to; the user's home directory by default. */
  homeDir?: string;
  /** Act through verified descriptors (/proc/self/fd); detected by default, false forces plain paths. */
  verifyDescriptors?: boolean;
}

/** Re-exported: tests and other tools (git) use them from here. */
export { DEFAULT_BLOCKED_PATTERNS, OutsideRootsError, relativeInside };

type Mode = 'read' | 'write';

/** C:\x, C:/x, C: and \\server\share: paths of another platform, which POSIX would take as odd file names. */
const WINDOWS_PATH = /^(?:[A-Za-z]:(?:[\\/]|$)|\\\\)/;

/** Linux's limits: PATH_MAX counts the terminating NUL, NAME_MAX one component, both in bytes. */
export const PATH_MAX_BYTES = 4095;
export const NAME_MAX_BYTES = 255;

/**
 * Refuses a path past the platform's limits before anything is created: the descriptor walk could otherwise
 * build a tree deeper than PATH_MAX, which ordinary tools (rm -r, a shell) cannot remove.
 */
function checkLength(abs: string, shown: string): string {
  const bytes = Buffer.byteLength(abs);
  if (bytes > PATH_MAX_BYTES) {
    throw new ToolError(
      `The path is too long: ${bytes.toLocaleString('en-US')} bytes (${shown.slice(0, 80)}…); a path here may be ` +
        `at most ${PATH_MAX_BYTES.toLocaleString('en-US')} bytes and each name in it ${NAME_MAX_BYTES} bytes`,
    );
  }
  const long = abs.split('/').find((name) => Buffer.byteLength(name) > NAME_MAX_BYTES);
  if (long !== undefined) {
    throw new ToolError(
      `A name in the path is too long: ${Buffer.byteLength(long)} bytes (${long.slice(0, 40)}…); each name may be ` +
        `at most ${NAME_MAX_BYTES} bytes and the whole path ${PATH_MAX_BYTES.toLocaleString('en-US')}`,
    );
  }
  return abs;
}

/** Decides which paths the filesystem tools may read and write, and hands back the real path to use. */
export class PathGuard {
  private readonly roots: Root[];
  private readonly blockedPatterns: BlockedPatterns;
  private readonly home: string;
  /** Serialises the file tools' writes (and, without /proc, their reads too); see runFileTool. */
  private readonly lock = new RwLock();
  private readonly layout: RootLayout;

  /** True when tools act through verified descriptors (Linux /proc): the race-free mode. */
  readonly raceFree: boolean;
  private readonly protection: ProtectedPaths;
  private readonly secrets: ProtectedPaths;

  private constructor(
    roots: Root[],
    patterns: readonly string[],
    home: string,
    raceFree: boolean,
    protection: ProtectedPaths,
    secrets: ProtectedPaths,
  ) {
    this.raceFree = raceFree;
    this.protection = protection;
    this.secrets = secrets;
    this.roots = roots;
    this.layout = rootLayout(roots);
    this.home = home;
    this.blockedPatterns = new BlockedPatterns(patterns);
  }

  /** Realpaths every root (creating missing read-write ones) so later checks compare real paths. */
  static async create(opts: PathGuardOptions): Promise<PathGuard> {
    const roots = await loadRoots(opts.roots, opts.readOnlyRoots);
    // Every root must read back through /proc/self/fd as its real path (a chroot or an odd mount may not).
    const available = (await Promise.all(roots.map((r) => procFdWorks(r.real)))).every(Boolean);
    if (opts.verifyDescriptors === true && !available) {
      throw new Error('verifyDescriptors needs /proc/self/fd (Linux); this system does not provide it');
    }
    const raceFree = opts.verifyDescriptors ?? available;
    const patterns = opts.blockedPatterns ?? DEFAULT_BLOCKED_PATTERNS;
    const covered = (p: string) => mostSpecific(roots, p, (r) => [r.lexical, r.real]) !== undefined;
    const installation = opts.installation
      ? { dir: opts.installation, roots: roots.flatMap((r) => [r.lexical, r.real]) }
      : undefined;
    const protection = await ProtectedPaths.resolve(opts.protectedPaths ?? [], covered, installation);
    const secrets = await ProtectedPaths.resolve(opts.secretPaths ?? [], covered);
    return new PathGuard(roots, patterns, opts.homeDir ?? homedir(), raceFree, protection, secrets);
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
    const entry = await this.resolveEntry(p, 'write');
    const pattern = this.isRoot(entry) ? undefined : this.blockedPatternFor(entry);
    if (pattern) throw protectedRefusal(this.absolute(p), pattern);
    return entry;
  }

  /** The entry `p` names itself (a final symlink not followed), for telling a link from its target. */
  resolveEntryForRead(p: string): Promise<string> {
    return this.resolveEntry(p, 'read');
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

  /** The blocked pattern or protected path a real path inside a root matches, if any; lets tools check every
   * entry of a subtree before a recursive delete or move. */
  blockedPatternFor(realPath: string): string | undefined {
    const configured = this.protection.match(realPath);
    if (configured) return configured;
    const root = this.mostSpecific(realPath, (r) => [r.real]);
    if (!root) return undefined;
    return this.blocked(relativeInside(root.root.real, realPath) ?? '');
  }

  /** The absolute path `p` names before symlinks are resolved (relative to the first root; `~` is home). */
  absolute(p: unknown): string {
    if (typeof p !== 'string' || p.trim() === '') throw new ToolError('A path must be a non-empty string');
    if (p.includes('\0')) throw new ToolError('Access denied: the path contains a NUL byte');
    if (path.sep === '/' && WINDOWS_PATH.test(p)) {
      throw new ToolError(
        `${JSON.stringify(p)} is a Windows path; this server takes POSIX paths: absolute ` +
          '("/home/me/project/notes.txt"), relative to the first allowed directory ("notes.txt"), or "~/…"',
      );
    }
    const expanded = p === '~' || p.startsWith('~/') ? path.join(this.home, p.slice(1)) : p;
    const base = (this.roots.find((r) => r.writable) ?? this.roots[0]).real;
    return checkLength(path.resolve(base, expanded), p);
  }

  /** Opens the directory at a real path from resolveFor*, verified to be that directory (see fd-path.ts). */
  async openDirectory(real: string): Promise<VerifiedDir> {
    this.assertInside(real);
    return VerifiedDir.open(real, this.raceFree);
  }

  /** The directories from the root holding a real path down to it, each opened from its parent (fd-path.ts). */
  openChain(real: string): Promise<VerifiedDir[]> {
    const found = this.assertInside(real);
    return openChain(found.root.real, found.rel, this.raceFree);
  }

  /**
   * mkdir -p for a real path from resolveForWrite: from its root down, each component opened (and made if
   * missing) from its parent's descriptor without following symlinks. `created` tells whether the last was new.
   */
  async makeDirectory(real: string): Promise<{ dir: VerifiedDir; created: boolean }> {
    const found = this.assertInside(real);
    let dir = await this.openDirectory(found.root.real);
    let created = false;
    for (const name of found.rel === '' ? [] : found.rel.split(path.sep)) {
      const parent = dir;
      try {
        ({ dir, created } = await parent.child(name, true));
      } finally {
        await parent.close();
      }
    }
    return { dir, created };
  }

  /** Runs `fn` with the verified parent directory of a real path and the entry's name in it. */
  async withParent<T>(real: string, fn: (dir: VerifiedDir, name: string) => Promise<T>): Promise<T> {
    if (this.isRoot(real)) {
      throw new ToolError(`${real} is one of the allowed directories itself, not an entry inside one`);
    }
    return using(this.openDirectory(path.dirname(real)), (dir) => fn(dir, path.basename(real)));
  }

  /** lstat() of a real path through its verified parent (a root through its own descriptor). */
  async lstatEntry(real: string): Promise<Stats> {
    if (this.isRoot(real)) return using(this.openDirectory(real), (dir) => dir.stat());
    return this.withParent(real, (dir, name) => lstat(dir.entry(name)));
  }

  /**
   * Runs a file tool's call. Writes take the lock one at a time, so two edits of one file never lose one of
   * them; reads take no lock where descriptors are verified (they cannot be misled), and share it otherwise,
   * so without /proc a move cannot swap a checked directory under a read or write. Other tools never wait.
   */
  runFileTool<T>(changes: boolean, fn: () => Promise<T>): Promise<T> {
    if (changes) return this.lock.write(fn);
    return this.raceFree ? fn() : this.lock.read(fn);
  }

  private async resolveEntry(p: string, mode: Mode): Promise<string> {
    const abs = this.absolute(p);
    if (this.isRoot(abs)) return this.resolve(p, mode);
    const parent = await this.resolveAbsolute(path.dirname(abs), mode, abs);
    const name = path.basename(abs);
    if ((await lstat(path.join(parent, name)).catch(() => null)) !== null) return path.join(parent, name);
    try {
      return path.join(parent, (await normalisationTwin(parent, name)) ?? name);
    } catch (err) {
      throw err instanceof ResolveError ? this.unresolvable(abs, err) : err;
    }
  }

  private async resolve(p: string, mode: Mode): Promise<string> {
    return this.resolveAbsolute(this.absolute(p), mode);
  }

  /** resolve() of an absolute path; refusals name `shown` (the entry, when its parent is resolved). */
  private async resolveAbsolute(abs: string, mode: Mode, shown = abs): Promise<string> {
    // 1. As written: the longest root that contains the path, by its configured or its real spelling.
    const lexical = this.mostSpecific(abs, (r) => [r.lexical, r.real]);
    if (!lexical) throw this.outside(shown);
    // 2. As it really is: every symlink followed from that root's real path, nothing outside looked at.
    let real: string;
    try {
      real = await resolveInside(lexical.root.real, lexical.rel.split(path.sep), this.layout);
    } catch (err) {
      throw err instanceof ResolveError ? this.unresolvable(shown, err) : err;
    }
    const actual = this.assertInside(real, shown);
    checkLength(shown === abs ? real : path.join(real, path.basename(shown)), shown);
    const target = shown === abs ? real : path.join(real, path.basename(shown));
    if (this.secrets.match(target) ?? this.secrets.match(shown)) {
      throw new ToolError(
        `Access denied: ${shown} holds toolshift's credentials (its tokens or keys); no tool reads or changes it`,
      );
    }
    if (mode === 'write') {
      for (const found of [lexical, actual]) {
        if (!found.root.writable) {
          const really = real === abs ? shown : `${shown} (really ${real})`;
          throw new ToolError(
            `Access denied: ${really} is in the read-only directory ${found.root.real}; ` +
              `writes are allowed only under: ${this.list(true)}`,
          );
        }
        const pattern = this.blocked(found.rel);
        if (pattern) throw protectedRefusal(shown, pattern);
      }
      // For an entry (`shown`) whose parent this is, the entry itself is what must not be protected.
      const entry = (p: string) => (shown === abs ? p : path.join(p, path.basename(shown)));
      const configured = this.protection.match(entry(real)) ?? this.protection.match(entry(abs));
      if (configured) throw protectedRefusal(shown, configured);
    }
    return real;
  }

  /** The most specific root holding a real path; anything else is refused as outside. */
  private assertInside(real: string, shown = real): Found {
    const found = this.mostSpecific(real, (r) => [r.real]);
    if (!found) throw this.outside(shown);
    return found;
  }

  private mostSpecific(p: string, spellings: (r: Root) => string[]): Found | undefined {
    return mostSpecific(this.roots, p, spellings);
  }

  private blocked(rel: string): string | undefined {
    return this.blockedPatterns.match(rel);
  }

  private list(writableOnly: boolean): string {
    const { read_write, read_only } = this.allowed();
    const rw = read_write.length > 0 ? read_write.join(', ') : 'none';
    if (writableOnly) return rw;
    return `read-write: ${rw}; read-only: ${read_only.length > 0 ? read_only.join(', ') : 'none'}`;
  }

  /** The one answer for every path that is, or leads, outside the roots: it says nothing about what is there. */
  outside(abs: string): OutsideRootsError {
    return new OutsideRootsError(
      `Access denied: ${abs} is outside the allowed directories (${this.list(false)})`,
    );
  }

  /** Why a path inside the roots cannot be used; an outward path gets outside() and nothing more. */
  private unresolvable(abs: string, err: ResolveError): ToolError {
    return err.reason.kind === 'outside' ? this.outside(abs) : unresolvableRefusal(abs, err.reason);
  }
}
