import { createHash, timingSafeEqual } from 'node:crypto';

// Comparing a presented token with an expected one without telling how much of it matched: both are hashed,
// and the hashes compared in constant time (lib/http/security.ts for bearer tokens, lib/http/console-door.ts for CSRF).

export function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The digests of the expected tokens (a few per process), so a request hashes only what it presents. */
const expectedDigests = new Map<string, Buffer>();

/** The digest of an expected token, kept. */
export function expectedDigest(expected: string): Buffer {
  let want = expectedDigests.get(expected);
  if (!want) {
    want = digest(expected);
    // Bounded: console logins' CSRF tokens pass through here too, one per login.
    if (expectedDigests.size > 1000) expectedDigests.clear();
    expectedDigests.set(expected, want);
  }
  return want;
}

/** Constant-time comparison of a presented token with the expected one (lengths hidden by hashing). */
export function tokenMatches(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), expectedDigest(expected));
}
