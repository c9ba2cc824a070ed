import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { McpConnection } from '../../../mcp-gateway/backends/mcp-connection.ts';
import { Redactor } from '../../../mcp-gateway/backends/redactor.ts';
import { UpstreamPool } from '../../../mcp-gateway/backends/upstream-pool.ts';
import { isAlive } from '../../helpers/processes.ts';
import { log } from '../../helpers/stack.ts';

// Issue 19: each gateway replica runs its stdio upstream servers in a bounded pool — one process per server,
// a cap on the calls in flight per server, a cap on the servers running at once, and idle shutdown. Shown
// with a real stdio server built with the SDK (tests/fixtures/mcp/ledger-server.mjs): each call appends a
// line to its ledger file at once, then holds its answer.

const LEDGER_SERVER = path.resolve('tests/fixtures/mcp/ledger-server.mjs');

let tmp: string;
const opened: McpConnection[] = [];
const pools: UpstreamPool[] = [];
beforeEach(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-pool-'));
});
afterEach(async () => {
  for (const c of opened.splice(0)) await c.close();
  for (const p of pools.splice(0)) p.close();
  await rm(tmp, { recursive: true, force: true });
});

function server(name: string, deps: { pool?: UpstreamPool; maxConcurrentCalls?: number } = {}) {
  const ledger = path.join(tmp, `${name}.ledger`);
  const conn = new McpConnection(
    name,
    {
      transport: 'stdio',
      command: process.execPath,
      args: [LEDGER_SERVER],
      env: { LEDGER: ledger },
      protocol: 'legacy',
    },
    { log, redactor: new Redactor({}), ...deps },
  );
  opened.push(conn);
  const lines = async () => (await readFile(ledger, 'utf8').catch(() => '')).split('\n').filter(Boolean);
  const append = (line: string, holdMs = 0, timeoutMs = 10_000) =>
    conn.callTool('append_line', { line, hold_ms: holdMs }, timeoutMs);
  return { conn, ledger, lines, append };
}

describe('the stdio upstream pool', () => {
  it('passes over a server that will not stop (it just got busy) and refuses, rather than asking it for ever', async () => {
    const pool = new UpstreamPool({ maxProcesses: 1, idleMs: 0, log });
    pools.push(pool);
    let asked = 0;
    // A running server as the pool sees it (PooledServer), one that answers every request to stop with no.
    const neverStops = {
      label: 'never-stops',
      lastUsed: 0,
      inFlight: 0,
      stopUnused: async () => {
        asked++;
        return false;
      },
    };
    await pool.admit(neverStops);
    await expect(pool.admit({ ...neverStops, label: 'newcomer' })).rejects.toThrow(/every one is in use/);
    expect(asked).toBe(1);
    expect(pool.size).toBe(1);
  });

  it('holds calls beyond the cap in flight until one finishes, and refuses beyond four times as many waiting', async () => {
    const s = server('capped', { maxConcurrentCalls: 2 });
    await s.conn.listTools();
    const calls = Array.from({ length: 10 }, (_, i) => s.append(`call ${i}`, 600));
    // Two reach the server at once; the other eight wait their turn (not sent, not in the ledger).
    await vi.waitFor(async () => expect(await s.lines()).toHaveLength(2));
    await vi.waitFor(() => expect(s.conn.waiting).toBe(8));
    expect(await s.lines()).toEqual(['call 0', 'call 1']);
    // An eleventh of the same caller is refused at once, saying why and what to change; it never reaches the server.
    await expect(s.append('over', 0)).rejects.toThrow(
      /capped: this session already has 2 calls in flight and 8 waiting on it, its limit \(UPSTREAM_MAX_CALLS_PER_SESSION=2 in flight, 4 times as many waiting\); append_line was not sent and did not run/,
    );
    const results = await Promise.all(calls);
    expect(results.every((r) => !r.isError)).toBe(true);
    expect((await s.lines()).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `call ${i}`).sort());
    expect(await s.lines()).not.toContain('over');
  });

  it('a waiting call that runs out of time is not sent', async () => {
    const s = server('slow', { maxConcurrentCalls: 1 });
    // Held long enough that the late call's 200 ms wait ends while it still runs, however slowly the machine
    // notices it started.
    const first = s.append('first', 3000);
    await vi.waitFor(async () => expect(await s.lines()).toEqual(['first']), { timeout: 2500, interval: 20 });
    await expect(s.append('late', 0, 200)).rejects.toThrow(/waited 200 ms for one of the 1 calls in flight/);
    await first;
    await new Promise((r) => setTimeout(r, 100));
    expect(await s.lines()).toEqual(['first']);
  });

  it('stops a server unused for the idle lifetime and starts it again on its next use', async () => {
    const pool = new UpstreamPool({ maxProcesses: 4, idleMs: 1000, log });
    pools.push(pool);
    const s = server('sleepy', { pool });
    await s.append('one');
    const pid = s.conn.status().pid as number;
    expect(isAlive(pid)).toBe(true);
    expect(pool.size).toBe(1);
    await vi.waitFor(
      () => {
        expect(s.conn.status()).toMatchObject({
          state: 'idle',
          reason: expect.stringMatching(/unused \(UPSTREAM_IDLE_S\)/),
        });
      },
      { timeout: 5000 },
    );
    await vi.waitFor(() => expect(isAlive(pid)).toBe(false));
    expect(pool.size).toBe(0);
    // The next call starts a new process; a stop for idleness is not a failure.
    await s.append('two');
    expect(s.conn.status()).toMatchObject({ state: 'up', restarts: 0 });
    expect(s.conn.status().pid).not.toBe(pid);
    expect(await s.lines()).toEqual(['one', 'two']);
  });

  it('runs at most UPSTREAM_MAX_PROCESSES servers: the least recently used idle one makes room; none busy, refused', async () => {
    const pool = new UpstreamPool({ maxProcesses: 1, idleMs: 0, log });
    pools.push(pool);
    const a = server('alpha', { pool });
    const b = server('beta', { pool });
    await a.append('a1');
    const alphaPid = a.conn.status().pid as number;
    await b.append('b1');
    expect(a.conn.status()).toMatchObject({ state: 'idle', reason: expect.stringMatching(/room for beta/) });
    await vi.waitFor(() => expect(isAlive(alphaPid)).toBe(false));
    expect(pool.size).toBe(1);
    // beta busy with a call: alpha cannot start, and says why.
    const busy = b.append('b2', 800);
    await vi.waitFor(async () => expect(await b.lines()).toEqual(['b1', 'b2']));
    await expect(a.append('a2')).rejects.toThrow(
      /alpha was not started: 1 upstream servers are running and every one is in use/,
    );
    await busy;
    await a.append('a3');
    expect(await a.lines()).toEqual(['a1', 'a3']);
    expect(b.conn.status().state).toBe('idle');
  });
});
