import { spawn } from 'node:child_process';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { isAlive } from '../../helpers/processes.ts';

// A query process whose tool-server dies mid-query (killed, crashed) must not run on as an orphan: a statement
// inside SQLite never lets it hear that its IPC channel closed, so a watchdog thread in it ends it instead.

let base: string;
let db: string;

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'db-orphan-')));
  db = path.join(base, 'app.db');
  const conn = new Database(db);
  conn.exec('CREATE TABLE t (x)');
  conn.close();
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

it('a query process ends when its tool-server is killed during a runaway query', async () => {
  const runnerUrl = new URL('../../../tool-server/tools/database/runner.ts', import.meta.url).href;
  const job = (sql: string) =>
    JSON.stringify({ op: 'query', file: db, busyTimeoutMs: 100, sql, maxRows: 10, maxBytes: 10_000 });
  // A stand-in tool-server: one pool, a quick query (so the process is up), then one that never ends.
  const script = `
    import { createDbRunner } from ${JSON.stringify(runnerUrl)};
    const runner = createDbRunner();
    await runner.run(${job('SELECT 1')}, 60000);
    void runner.run(${job('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c')}, 600000);
    setTimeout(() => console.log('pid ' + runner.pids()[0]), 100);
    setInterval(() => {}, 1000);
  `;
  const server = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let child = 0;
  try {
    child = await new Promise<number>((resolve, reject) => {
      let out = '';
      server.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /pid (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      server.once('exit', (code) => reject(new Error(`the stand-in server exited (${code}): ${out}`)));
    });
    expect(isAlive(child)).toBe(true);
    server.kill('SIGKILL');
    // Wait for the orphan to go (the watchdog looks every 500 ms); bounded, not timed.
    for (let i = 0; i < 100 && isAlive(child); i++) await new Promise((r) => setTimeout(r, 100));
    expect(isAlive(child)).toBe(false);
  } finally {
    server.kill('SIGKILL');
    if (child && isAlive(child)) process.kill(child, 'SIGKILL');
  }
});
