import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { freshDatabase } from '../helpers/postgres.ts';
import { SPLIT_TOOLSETS } from '../helpers/stack.ts';

// Issue 34 §1: a gateway never blocks on its database. While a connection of its own (no replica's) holds a
// session's row locked for up to 5 s, a replica with a request of that session waiting on the lock answers
// /health and another session's tool call at once; the waiting request answers once the lock is released.
// (The gateway's statements used to run synchronously on a worker thread: one waiting froze the whole event
// loop, /health included.) The order is asserted, not milliseconds; BENCHMARKS.md figure 17 measures them.

const TOKEN = 'lock-test-admin-token-1234';
const HOLD_MS = 5000;

let tmp: string;
let url: string;
const running: Listening[] = [];
let a: Listening;
let b: Listening;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-lock-'));
  const workspace = path.join(tmp, 'workspace');
  const toolsets = path.join(tmp, 'toolsets');
  await mkdir(workspace);
  await mkdir(toolsets);
  await writeFile(path.join(workspace, 'a.txt'), 'hello');
  for (const [name, body] of Object.entries(SPLIT_TOOLSETS)) await writeFile(path.join(toolsets, name), body);
  url = await freshDatabase('lock');
  const env = {
    HOST: '127.0.0.1',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSETS_DIR: toolsets,
    FS_ROOTS: workspace,
    LOG_LEVEL: 'silent',
    GATEWAY_ADMIN_TOKEN: TOKEN,
    DATABASE_URL: url,
  };
  const tools = await startToolServer(loadConfig({ ...env, TOOLSHIFT_DATA_DIR: path.join(tmp, 'tools') }));
  running.push(tools);
  for (const name of ['a', 'b']) {
    running.push(
      await startGateway(
        loadConfig({ ...env, TOOL_SERVER_URL: tools.url, TOOLSHIFT_DATA_DIR: path.join(tmp, name) }),
        { backendWaitMs: 5000 },
      ),
    );
  }
  [, a, b] = running;
});

afterAll(async () => {
  for (const s of running.splice(0).reverse()) await s.close().catch(() => undefined);
  await rm(tmp, { recursive: true, force: true });
});

async function request(on: Listening, method: 'GET' | 'POST', route: string, body?: unknown) {
  const res = await fetch(`${on.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const activate = (on: Listening, session: string, ids: string[]) =>
  request(on, 'POST', '/mcp/admin/toolsets', { action: 'ACTIVATE', session_id: session, toolset_ids: ids });
const read = (on: Listening, session: string) =>
  request(on, 'POST', '/mcp/tools/read_text_file/call', {
    session_id: session,
    arguments: { path: 'a.txt' },
  });

describe('a session row locked by another connection', () => {
  it('holds up only that session: the other replica’s /health and another session’s call answer before it is released', async () => {
    for (const session of ['locked', 'other'])
      expect((await activate(a, session, ['fs_read'])).status).toBe(200);

    // A plain connection, no replica's, takes the locked session's row for up to 5 s.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    const events: string[] = [];
    const at: Record<string, number> = {};
    const mark = (what: string) => {
      events.push(what);
      at[what] = performance.now();
    };
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM sessions WHERE id = 'locked' FOR UPDATE");
      mark('locked');
      // Replica b is asked to change the locked session: it waits for the row.
      const waiting = activate(b, 'locked', ['fs_write']).then((r) => {
        mark('locked session answered');
        return r;
      });
      // Meanwhile, on both replicas: /health and a call of another session.
      const others = Promise.all(
        [a, b].flatMap((on, i) => [
          request(on, 'GET', '/health').then((r) => {
            mark(`health ${'ab'[i]}`);
            return r;
          }),
          read(on, 'other').then((r) => {
            mark(`other session's call on ${'ab'[i]}`);
            return r;
          }),
        ]),
      );
      // The lock goes once they have all answered, or after 5 s at the latest.
      const answered = await Promise.race([
        others,
        new Promise<null>((r) => setTimeout(() => r(null), HOLD_MS)),
      ]);
      await holder.query('COMMIT');
      mark('released');
      expect(answered, `answered in time: ${events.join(', ')}`).not.toBeNull();
      for (const r of answered ?? []) expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect((answered ?? []).filter((r) => 'success' in r.body).every((r) => r.body.success)).toBe(true);
      const locked = await waiting;
      expect(locked.status, JSON.stringify(locked.body)).toBe(200);
      expect(locked.body.active_toolsets).toEqual(['fs_read', 'fs_write']);
      // The order: everything else before the release, the locked session's change after it.
      expect(events.indexOf('released')).toBe(events.length - 2);
      expect(events.at(-1)).toBe('locked session answered');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }, 30_000);
});
