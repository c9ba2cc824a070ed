import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The tests mirror the code: tests/<service>/… for each service, tests/cli and tests/lib, and tests/system for
// what needs the whole daemon, other processes or a long run (live stacks, start-up, floods, the conformance
// suite, the benchmark's tests, snapshots, the docs); stress tests (*.stress.test.ts) belong to `system`;
// `console` drives the web console in headless Chromium.
//
// Each folder of tests/<part> (tool-server, mcp-gateway, agent-server, cli, lib) is two vitest projects:
// - `unit:<part>`: a module, a tool or one app called in-process, its collaborators faked or in memory (temp
//   directories allowed): no other service, no port, no process started by the test, no PostgreSQL;
// - `int:<part>`: in-process integration: the apps wired together (tests/helpers/stack.ts), loopback servers
//   (MCP, web, the model's edge through msw), processes the test starts (the CLI, a pty, a query runner),
//   PostgreSQL (freshDatabase; the store contracts run both databases).
// A file is `int` when it imports or calls one of INTEGRATION below, else `unit`: nothing to list by hand, and a
// unit file that starts to use a stack or a server moves over by itself.
//
// `npx vitest run --project 'unit:*'` runs every unit test (seconds, never PostgreSQL);
// `--project '*:agent-server'` one part; `npm run test:fast` = units + in-process integration (all but system,
// console and postgres); `npm test` every project (what CI runs). `postgres` runs the agent-server's and the
// gateway's tests and the end-to-end test again with tasks and the gateway's state in PostgreSQL
// (tests/helpers/stack.ts and e2e read TOOLSHIFT_TEST_STORE).
// PostgreSQL is started only when a test asks for a database (tests/helpers/global-setup.ts): a run of units, or
// of files that never call freshDatabase, starts none.

const ROOT = path.dirname(fileURLToPath(import.meta.url));
const STRESS = '**/*.stress.test.ts';
// `attacks`: the adversarial reviews' tests, each an attack shown failing by its effect.
const PARTS = ['tool-server', 'mcp-gateway', 'agent-server', 'cli', 'lib', 'attacks'];

/** What makes a test file an integration test: another service, a port, a process, PostgreSQL. */
const INTEGRATION =
  /helpers\/(stack|mcp-http-server|web-servers|processes|pty|cli|msw|postgres|daemon|chaos-stack)\.ts|start\/stack\.ts|\bfreshDatabase\b|node:child_process|node:net|\bcreateServer\b|\.listen\(|from 'msw'|createDbRunner/;

/** tests/<part>'s test files (not stress), split by INTEGRATION. */
function tiers(part: string): { unit: string[]; int: string[] } {
  const files = readdirSync(path.join(ROOT, 'tests', part), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts') && !f.endsWith('.stress.test.ts'))
    .map((f) => `tests/${part}/${f}`)
    .sort();
  const int = files.filter((f) => INTEGRATION.test(readFileSync(path.join(ROOT, f), 'utf8')));
  return { unit: files.filter((f) => !int.includes(f)), int };
}

const split = Object.fromEntries(PARTS.map((part) => [part, tiers(part)]));
const partProjects = PARTS.flatMap((part) => {
  const { unit, int } = split[part];
  return [
    { extends: true as const, test: { name: `unit:${part}`, include: unit } },
    { extends: true as const, test: { name: `int:${part}`, include: int } },
  ];
});

export default defineConfig({
  test: {
    globalSetup: ['tests/helpers/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    projects: [
      ...partProjects,
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
          // The integration tests (units use no store).
          include: [...split['agent-server'].int, ...split['mcp-gateway'].int, 'tests/system/e2e.test.ts'],
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
          // The same suites over the services' HTTP routes (tests/helpers/stack.ts), where the others link in-process.
          env: { TOOLSHIFT_TEST_STORE: 'postgres', TOOLSHIFT_TEST_LINK: 'http' },
        },
      },
    ],
  },
});
