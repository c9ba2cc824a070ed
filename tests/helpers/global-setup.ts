import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestPostgres } from './postgres.ts';

// Once per `vitest run`, before any test file: the suite needs a supported Node (the services and the processes
// the tests start run on its type stripping), and no test may write to the user's real data directory (the
// default TOOLSHIFT_DATA_DIR): XDG_DATA_HOME points at a temporary directory, removed at the end. A throwaway
// PostgreSQL server runs for the PostgreSQL tests (tests/helpers/postgres.ts); they read its URL from
// TOOLSHIFT_TEST_POSTGRES_URL, or the reason there is none from TOOLSHIFT_TEST_POSTGRES_ERROR.

export default async function setup(): Promise<() => void> {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (!((major === 22 && minor >= 18) || major === 24 || major >= 26)) {
    throw new Error(
      `the tests need Node.js 22.18+, 24 or 26+ (this is ${process.versions.node}); ` +
        'run them as `scripts/node-line.sh 26 npm test` (CONTRIBUTING.md)',
    );
  }
  const data = mkdtempSync(path.join(tmpdir(), 'toolshift-xdg-'));
  process.env.XDG_DATA_HOME = data;
  let postgres: Awaited<ReturnType<typeof startTestPostgres>> | undefined;
  try {
    postgres = await startTestPostgres();
    process.env.TOOLSHIFT_TEST_POSTGRES_URL = postgres.url;
  } catch (err) {
    process.env.TOOLSHIFT_TEST_POSTGRES_ERROR = (err as Error).message;
  }
  return () => {
    postgres?.stop();
    rmSync(data, { recursive: true, force: true });
  };
}
