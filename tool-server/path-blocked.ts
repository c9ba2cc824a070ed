import path from 'node:path';
import picomatch from 'picomatch';

// What no tool may write, whatever root it is in: version-control data, dependencies, keys and secrets.

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
