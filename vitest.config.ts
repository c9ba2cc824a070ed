import { defineConfig } from 'vitest/config';

// The tests mirror the code: tests/<service>/… for each service, tests/cli and tests/lib, and tests/system for
// what needs the whole daemon, other processes or a long run (live stacks, start-up, floods, the conformance
// suite, the benchmark's tests, snapshots, the docs). Each folder is a vitest project, so one service's tests
// run alone (`npx vitest run --project tool-server`); stress tests (*.stress.test.ts) belong to `system`;
// `console` drives the web console in headless Chromium.
// `npm test` runs every project (what CI runs); `npm run test:fast` all but `system`. `postgres` runs the
// agent-server's and the gateway's tests and the end-to-end test again with tasks and the gateway's state in
// PostgreSQL (the server the test run starts; tests/helpers/stack.ts and e2e read TOOLSHIFT_TEST_STORE).

const STRESS = '**/*.stress.test.ts';
const fast = (name: string) => ({
  extends: true as const,
  test: { name, include: [`tests/${name}/**/*.test.ts`], exclude: [STRESS] },
});

export default defineConfig({
  test: {
    globalSetup: ['tests/helpers/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    projects: [
      fast('tool-server'),
      fast('mcp-gateway'),
      fast('agent-server'),
      fast('cli'),
      fast('lib'),
      fast('attacks'),
      { extends: true, test: { name: 'system', include: ['tests/system/**/*.test.ts', `tests/${STRESS}`] } },
      // The web console in real headless Chromium (Debian's chromium, driven by playwright-core).
      {
        extends: true,
        test: { name: 'console', include: ['tests/console/**/*.test.ts'], testTimeout: 60_000 },
      },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: [
            'tests/agent-server/**/*.test.ts',
            'tests/mcp-gateway/**/*.test.ts',
            'tests/system/e2e.test.ts',
          ],
          exclude: [
            STRESS,
            // Already run on both stores, each explicitly.
            'tests/agent-server/store/**',
            'tests/agent-server/tasks/queue.test.ts',
            'tests/agent-server/tasks/recovery.test.ts',
            'tests/agent-server/tasks/fenced-takeover.test.ts',
            'tests/mcp-gateway/store/**',
            // No state of the gateway's in them: the upstream connections alone.
            'tests/mcp-gateway/backends/**',
            // They read the SQLite file itself (what is on disk, and what is not).
            'tests/mcp-gateway/catalog/catalog.test.ts',
            'tests/mcp-gateway/catalog/pins.test.ts',
            'tests/mcp-gateway/catalog/reload.test.ts',
            'tests/mcp-gateway/core/gateway.test.ts',
            'tests/mcp-gateway/face/http.test.ts',
            'tests/mcp-gateway/face/view-policy-sessions.test.ts',
          ],
          env: { TOOLSHIFT_TEST_STORE: 'postgres' },
        },
      },
    ],
  },
});
