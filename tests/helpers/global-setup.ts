import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startPostgresBroker } from './postgres.ts';

// Once per `vitest run`, before any test file: the suite needs a supported Node (the services and the processes
// the tests start run on its type stripping), and no test may write to the user's real data directory (the
// default TOOLSHIFT_DATA_DIR): XDG_DATA_HOME points at a temporary directory, removed at the end.
// PostgreSQL is started only when a test asks for it: a loopback broker (tests/helpers/postgres.ts) starts one
// throwaway server on the first freshDatabase() of any worker, shares it with every later one, and stops it at
// the end; a run whose tests never call freshDatabase (most of `npm run test:fast`) starts none. Workers find
// the broker through TOOLSHIFT_TEST_POSTGRES_BROKER.

export default async function setup(): Promise<() => Promise<void>> {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (!((major === 22 && minor >= 18) || major === 24 || major >= 26)) {
    throw new Error(
      `the tests need Node.js 22.18+, 24 or 26+ (this is ${process.versions.node}); ` +
        'run them as `scripts/node-line.sh 26 npm test` (CONTRIBUTING.md)',
    );
  }
  const data = mkdtempSync(path.join(tmpdir(), 'toolshift-xdg-'));
  process.env.XDG_DATA_HOME = data;
  const broker = await startPostgresBroker();
  process.env.TOOLSHIFT_TEST_POSTGRES_BROKER = broker.url;
  return async () => {
    await broker.close();
    rmSync(data, { recursive: true, force: true });
  };
}
