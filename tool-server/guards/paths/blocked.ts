import { realpath } from 'node:fs/promises';
import path from 'node:path';
import picomatch from 'picomatch';
import { relativeInside } from './roots.ts';

// What no tool may write, whatever root it is in: version-control data, dependencies, keys and secrets (by
// pattern), and toolshift's own configuration and data (by absolute path) where a root covers them.

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

/** The blocked patterns compiled once; matched against paths relative to their root. */
export class BlockedPatterns {
  private readonly matchers: { pattern: string; test: (p: string) => boolean }[];

  constructor(patterns: readonly string[]) {
    this.matchers = patterns.map((pattern) => ({
      pattern,
      test: picomatch(pattern, { dot: true, nocase: true }),
    }));
  }

  /** The first pattern `rel` (relative to its root, '' for the root itself) matches, if any. */
  match(rel: string): string | undefined {
    if (rel === '') return undefined;
    const posix = rel.split(path.sep).join('/');
    return this.matchers.find((m) => m.test(posix))?.pattern;
  }
}

/** The real path of `abs`, its missing tail kept as written (a protected path may not exist yet). */
async function realTail(abs: string): Promise<string> {
  const tail: string[] = [];
  for (let head = abs; ; head = path.dirname(head)) {
    try {
      return path.join(await realpath(head), ...tail.reverse());
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || head === path.dirname(head)) return abs;
      tail.push(path.basename(head));
    }
  }
}

/** One protected place: its spellings (as configured and real), and roots nested inside it that stay open. */
interface Protected {
  spellings: string[];
  /** Roots lying strictly inside this place (their own spellings): the most specific root decides there. */
  openings: string[];
}

/**
 * Absolute paths no tool may write, nor create, move or delete anything inside: the daemon's own toolset
 * files (an `mcp.command` there runs at the next start), prompts, policy, `.env`, databases, and the running
 * installation (its package.json scripts, sources and node_modules run at the next `npm start`). Only those
 * inside a root are kept; one above a root would otherwise protect the whole root. A root configured inside
 * a protected place (`./workspace` in a clone run with `FS_ROOTS=.:./workspace`) stays writable: it was named as one.
 */
export class ProtectedPaths {
  private readonly places: readonly Protected[];

  private constructor(places: readonly Protected[]) {
    this.places = places;
  }

  /**
   * Each of `paths` (and the `installation`) as configured and as it really is; `insideRoot` tells which ones
   * a root covers. Roots (`roots`: every root's spellings) inside the installation stay open; inside the
   * configuration and data nothing does.
   */
  static async resolve(
    paths: readonly string[],
    insideRoot: (p: string) => boolean,
    installation?: { dir: string; roots: readonly string[] },
  ): Promise<ProtectedPaths> {
    const places: Protected[] = [];
    const all = [
      ...paths.map((p) => ({ p, open: false })),
      ...(installation ? [{ p: installation.dir, open: true }] : []),
    ];
    for (const { p: configured, open } of all) {
      const abs = path.resolve(configured);
      const real = await realTail(abs);
      if (!insideRoot(abs) && !insideRoot(real)) continue;
      const spellings = [...new Set([abs, real])];
      const nested = (r: string) => spellings.some((s) => (relativeInside(s, r) ?? '') !== '');
      const openings = open ? (installation?.roots ?? []).filter(nested) : [];
      places.push({ spellings, openings });
    }
    return new ProtectedPaths(places);
  }

  /** The protected path `p` is (as itself) or lies in (as `<path>/**`), if any. */
  match(p: string): string | undefined {
    for (const place of this.places) {
      if (place.openings.some((o) => relativeInside(o, p) !== null)) continue;
      for (const spelling of place.spellings) {
        const rel = relativeInside(spelling, p);
        if (rel === '') return spelling;
        if (rel !== null) return `${spelling}/**`;
      }
    }
    return undefined;
  }
}
