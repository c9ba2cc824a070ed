import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolServerBackend } from '../../../mcp-gateway/backends/tool-server-backend.ts';
import { createToolServerApp } from '../../../tool-server/app.ts';
import { SESSION_HEADER } from '../../../tool-server/contract.ts';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import type { DbJob } from '../../../tool-server/tools/database/ops.ts';
import { createDbRunner, type DbRunner } from '../../../tool-server/tools/database/runner.ts';
import { databaseTools } from '../../../tool-server/tools/database/tools.ts';
import { fetchOf, log, openSecurity } from '../../helpers/stack.ts';

// Issue 32, item 4, on the tool-server: its pool of query processes is shared by every session. Jobs waited in
// arrival order, so one session's burst of queries held another session's query behind all of it (often past
// its deadline). Now the gateway says whose call it is (SESSION_HEADER) and the pool serves sessions in turn.

let base: string;
let db: string;
const runners: DbRunner[] = [];

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'db-fair-')));
  db = path.join(base, 'app.db');
  const conn = new Database(db);
  conn.exec('CREATE TABLE t (x)');
  conn.close();
});

afterAll(async () => {
  for (const r of runners.splice(0)) r.close();
  await rm(base, { recursive: true, force: true });
});

const job = (sql: string): DbJob => ({
  op: 'query',
  file: db,
  busyTimeoutMs: 100,
  sql,
  maxRows: 10,
  maxBytes: 10_000,
});

describe("the database tools' pool of query processes", () => {
  it("runs another session's query next, not after a burst of one session's queries that came first", async () => {
    const runner = createDbRunner({ maxProcesses: 1, maxIdle: 1 });
    runners.push(runner);
    const order: string[] = [];
    const run = (session: string, label: string) =>
      runner.run(job(`SELECT '${label}'`), 60_000, session).then((result) => {
        order.push(label);
        return result;
      });
    const all = [
      ...Array.from({ length: 6 }, (_, n) => run('A', `a${n}`)),
      run('B', 'b0'),
      run('A', 'a6'),
      run('C', 'c0'),
    ];
    const results = (await Promise.all(all)) as { rows: unknown[][] }[];
    // a0 had the one process when the others came; then each session in turn, the one served longest ago first.
    expect(order).toEqual(['a0', 'b0', 'c0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6']);
    expect(results.map((r) => r.rows[0]?.[0])).toEqual([
      'a0',
      'a1',
      'a2',
      'a3',
      'a4',
      'a5',
      'b0',
      'a6',
      'c0',
    ]);
  });

  it('hears whose call it is from the gateway: its tool-server backend sends the session with each call', async () => {
    const runner = createDbRunner({ maxProcesses: 1, maxIdle: 1 });
    runners.push(runner);
    const seen: (string | undefined)[] = [];
    // The pool as the tool uses it, noting the session each job came with.
    const noting: DbRunner = {
      run: (j, timeoutMs, session) => {
        seen.push(session);
        return runner.run(j, timeoutMs, session);
      },
      pids: () => runner.pids(),
      close: () => runner.close(),
    };
    const paths = await PathGuard.create({ roots: [base], readOnlyRoots: [] });
    const app = createToolServerApp({
      registry: createRegistry(databaseTools),
      context: { paths, maxReadBytes: 4096, databases: { runner: noting } },
      log,
      security: openSecurity,
    });
    const backend = toolServerBackend({ baseUrl: 'http://tool-server', fetch: fetchOf(app) });
    const args = { path: db, sql: 'SELECT 1' };
    const answers = await Promise.all([
      backend.callTool('query', args, { session: 'task 7 ü' }),
      backend.callTool('query', args, { session: 'other' }),
      backend.callTool('query', args),
    ]);
    expect(answers.every((a) => a.success)).toBe(true);
    // The three were sent at once: each came with its own session, in whatever order they arrived.
    expect(seen).toHaveLength(3);
    expect(seen).toEqual(expect.arrayContaining([encodeURIComponent('task 7 ü'), 'other', undefined]));
    // A session header past its bound is refused, naming it; nothing runs.
    const res = await app.request('/tools/query', {
      method: 'POST',
      headers: { 'content-type': 'application/json', [SESSION_HEADER]: 'x'.repeat(1025) },
      body: JSON.stringify(args),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/x-toolshift-session/);
    expect(seen).toHaveLength(3);
  });
});
