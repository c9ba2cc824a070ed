import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { CredentialVariable } from '../../lib/config/credentials.ts';

/** The token a daemon started on `dataDir` made for `variable` (read as the CLI reads it). */
export function storedToken(dataDir: string, variable: CredentialVariable): string {
  const stored = JSON.parse(readFileSync(path.join(dataDir, 'credentials.json'), 'utf8')) as Record<
    string,
    string
  >;
  return stored[variable];
}

/** `Authorization` for a daemon's stored token. */
export function bearerOf(dataDir: string, variable: CredentialVariable): { authorization: string } {
  return { authorization: `Bearer ${storedToken(dataDir, variable)}` };
}

/**
 * For a CLI run in a test: a data directory with no credentials file, so the CLI never picks up the tokens of
 * a daemon the developer started on this machine (`~/.local/share/toolshift/credentials.json`).
 */
export const NO_STORED_CREDENTIALS = { TOOLSHIFT_DATA_DIR: '/nonexistent/toolshift-test-data' };
