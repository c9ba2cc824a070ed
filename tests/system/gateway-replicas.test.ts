import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { freshDatabase } from '../helpers/postgres.ts';
import { SPLIT_TOOLSETS } from '../helpers/stack.ts';

// Issue 19: several gateways share one PostgreSQL. Two replicas here, each with a data directory of its own
// (nothing shared through the disk): a session changed on one is served by the other, an operator's DISABLE
// on one is refused by the other, an approval asked on one is decided on the other, and a legacy MCP session
// opened on one is served by the other, its client told of a change made there.

const ADMIN = 'admin-token-replicas-123';
const AGENT = 'agent-token-replicas-456';
const MCP = 'mcp-token-replicas-789';

let tmp: string;
let workspace: string;
const running: Listening[] = [];
let a: Listening;
let b: Listening;

/**
 * Waits until `count` gateway replicas listen for each other's changes: each holds a connection whose last
 * statement was LISTEN (lib/db/postgres.ts, listenPostgres), seen in pg_stat_activity.
 */
async function listening(url: string, count: number): Promise<void> {
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const listeners = async () =>
      (
        await admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
             AND application_name = 'toolshift mcp-gateway' AND state = 'idle' AND query LIKE 'LISTEN %'`,
        )
      ).rows[0].n as number;
    await vi.waitFor(async () => expect(await listeners()).toBeGreaterThanOrEqual(count), {
      timeout: 15_000,
      interval: 50,
    });
  } finally {
    await admin.end();
  }
}

const POLICY = `default: allow
rules:
  - { tool: delete_file, decision: ask, reason: deleting needs a human yes }
`;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-replicas-'));
  workspace = path.join(tmp, 'workspace');
  const toolsets = path.join(tmp, 'toolsets');
  await mkdir(workspace);
  await mkdir(toolsets);
  for (const [name, body] of Object.entries(SPLIT_TOOLSETS)) await writeFile(path.join(toolsets, name), body);
  await writeFile(path.join(toolsets, 'policy.yaml'), POLICY);
  const env = {
    HOST: '127.0.0.1',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSETS_DIR: toolsets,
    FS_ROOTS: workspace,
    LOG_LEVEL: 'silent',
    GATEWAY_MCP_TOKEN: MCP,
    GATEWAY_ADMIN_TOKEN: ADMIN,
    GATEWAY_AGENT_TOKEN: AGENT,
    // Both replicas read one policy (its default place is each one's own data directory).
    POLICY_FILE: path.join(toolsets, 'policy.yaml'),
    DATABASE_URL: await freshDatabase('replicas'),
  };
  const databaseUrl = env.DATABASE_URL;
  const tools = await startToolServer(loadConfig({ ...env, TOOLSHIFT_DATA_DIR: path.join(tmp, 'tools') }));
  running.push(tools);
  const replica = async (name: string) => {
    const g = await startGateway(
      loadConfig({ ...env, TOOL_SERVER_URL: tools.url, TOOLSHIFT_DATA_DIR: path.join(tmp, name) }),
      { backendWaitMs: 5000 },
    );
    running.push(g);
    return g;
  };
  a = await replica('a');
  b = await replica('b');
  // Both are listening for each other's changes before the tests change anything.
  await listening(databaseUrl, 2);
});

afterAll(async () => {
  for (const s of running.splice(0).reverse()) await s.close().catch(() => undefined);
  await rm(tmp, { recursive: true, force: true });
});

async function call(
  on: Listening,
  method: 'GET' | 'POST',
  route: string,
  body?: unknown,
  token = AGENT,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${on.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const change = (on: Listening, body: Record<string, unknown>, token = AGENT) =>
  call(on, 'POST', '/mcp/admin/toolsets', body, token);
const useTool = (on: Listening, session: string, name: string, args: Record<string, unknown>) =>
  call(on, 'POST', `/mcp/tools/${name}/call`, { session_id: session, arguments: args });

describe('two gateway replicas on one PostgreSQL', () => {
  it('serve one session: a change on one is used on the other at its next request', async () => {
    expect(
      (await change(a, { action: 'ACTIVATE', session_id: 'ses_r1', toolset_ids: ['fs_write'] })).status,
    ).toBe(200);
    const tools = await call(b, 'GET', '/mcp/tools?session_id=ses_r1');
    expect((tools.body.tools as { name: string }[]).map((t) => t.name)).toContain('write_file');
    const written = await useTool(b, 'ses_r1', 'write_file', { path: 'from-b.txt', content: 'via b' });
    expect(written.status, JSON.stringify(written.body)).toBe(200);
    expect(await readFile(path.join(workspace, 'from-b.txt'), 'utf8')).toBe('via b');
    // The audit trail is one: a's listing shows the call b served (written within a few ms, in a batch).
    await vi.waitFor(async () => {
      const audit = await call(a, 'GET', '/mcp/admin/audit?session_id=ses_r1&limit=10', undefined, ADMIN);
      expect(
        (audit.body.audit as { kind: string; subject: string }[]).map((r) => [r.kind, r.subject]),
      ).toEqual([
        ['call', 'write_file'],
        ['activate', 'fs_write'],
      ]);
    });
  });

  it("an operator's DISABLE on one replica is refused by the other; ENABLE there is seen back", async () => {
    await change(a, { action: 'ACTIVATE', session_id: 'ses_r2', toolset_ids: ['fs_write'] });
    expect((await change(a, { action: 'DISABLE', toolset_ids: ['fs_write'] }, ADMIN)).status).toBe(200);
    const disabledAt = performance.now();
    // A call on the other replica right after the answer: refused, nothing written.
    const refused = await useTool(b, 'ses_r2', 'write_file', { path: 'after-disable.txt', content: 'no' });
    expect(refused.status).toBe(403);
    await expect(readFile(path.join(workspace, 'after-disable.txt'))).rejects.toThrow(/ENOENT/);
    // Activating it there is refused as disabled once the other replica heard of it (its cache dropped).
    let tries = 0;
    await vi.waitFor(
      async () => {
        tries++;
        const res = await change(b, { action: 'ACTIVATE', session_id: 'ses_r2', toolset_ids: ['fs_write'] });
        expect(res.body.code ?? res.body.error).toMatch(/disabled/);
      },
      { timeout: 5000, interval: 1 },
    );
    console.log(
      `DISABLE on replica a refused by replica b ${(performance.now() - disabledAt).toFixed(1)} ms after a answered (${tries} tries)`,
    );
    const listed = await call(b, 'GET', '/mcp/admin/toolsets?session_id=ses_r2');
    expect(listed.body.toolsets).toContainEqual(expect.objectContaining({ id: 'fs_write', enabled: false }));

    expect((await change(b, { action: 'ENABLE', toolset_ids: ['fs_write'] }, ADMIN)).status).toBe(200);
    await vi.waitFor(async () => {
      const res = await change(a, { action: 'ACTIVATE', session_id: 'ses_r2', toolset_ids: ['fs_write'] });
      expect(res.status).toBe(200);
    });
  });

  it('an approval asked on one replica is decided on the other, and the call goes on where it was asked', async () => {
    await writeFile(path.join(workspace, 'doomed.txt'), 'bye');
    await change(a, { action: 'ACTIVATE', session_id: 'ses_r3', toolset_ids: ['fs_write'] });
    const asked = await useTool(a, 'ses_r3', 'delete_file', { path: 'doomed.txt' });
    expect(asked.status, JSON.stringify(asked.body)).toBe(409);
    const approvalId = (asked.body.approval as { id: string }).id;
    const decided = await call(b, 'POST', `/mcp/admin/approvals/${approvalId}`, { approve: true }, ADMIN);
    expect(decided.body.status).toBe('approved');
    const again = await call(a, 'POST', `/mcp/admin/approvals/${approvalId}`, { approve: false }, ADMIN);
    expect(again.status).toBe(409); // the first decision wins, whichever replica got the second
    expect((await useTool(a, 'ses_r3', 'delete_file', { path: 'doomed.txt' })).status).toBe(200);
    await expect(readFile(path.join(workspace, 'doomed.txt'))).rejects.toThrow(/ENOENT/);
    // One approval, one call, whichever replica the same request reaches next: the other asks anew.
    await writeFile(path.join(workspace, 'doomed.txt'), 'back');
    const again2 = await useTool(b, 'ses_r3', 'delete_file', { path: 'doomed.txt' });
    expect(again2.status).toBe(409);
    expect((again2.body.approval as { id: string }).id).not.toBe(approvalId);
    expect(await readFile(path.join(workspace, 'doomed.txt'), 'utf8')).toBe('back');
  });

  it('a legacy MCP session opened on one replica is served on the other, and hears a change made there', async () => {
    /** Whether a client's stream of notifications (its GET /mcp) has been answered. */
    let streamOpen = false;
    const connect = async (on: Listening, sessionId?: string) => {
      const client = new Client({ name: 'desktop-like', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${on.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${MCP}` } },
        sessionId,
        fetch: async (url, init) => {
          const res = await fetch(url, init);
          if ((init?.method ?? 'GET') === 'GET' && res.ok) streamOpen = true;
          return res;
        },
      });
      await client.connect(transport);
      return { client, transport };
    };
    const first = await connect(a);
    const heard: string[] = [];
    first.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      heard.push('tools/list_changed');
    });
    const sessionId = first.transport.sessionId as string;
    expect(sessionId).toMatch(/^mcp_/);
    // Its stream of notifications is open on a before b changes anything.
    await vi.waitFor(() => expect(streamOpen).toBe(true), { timeout: 5000, interval: 20 });

    // The same session's requests reaching b (a balancer without affinity): served, and a change made there…
    const second = await connect(b, sessionId);
    const activated = (await second.client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_read'] },
    })) as { isError?: boolean; content: { text: string }[] };
    expect(activated.isError, activated.content[0]?.text).toBeFalsy();
    // …reaches the client's stream on a, and a serves the session's new tools.
    await vi.waitFor(() => expect(heard).toContain('tools/list_changed'), { timeout: 5000 });
    expect((await first.client.listTools()).tools.map((t) => t.name)).toContain('read_text_file');
    await writeFile(path.join(workspace, 'seen.txt'), 'read through a');
    const read = (await first.client.callTool({
      name: 'read_text_file',
      arguments: { path: 'seen.txt' },
    })) as {
      content: { text: string }[];
    };
    expect(read.content[0].text).toContain('read through a');

    // Ended on b: a answers the session as gone.
    await second.transport.terminateSession();
    await expect(first.client.listTools()).rejects.toThrow(/404|not found/i);
    await first.client.close().catch(() => undefined);
  });
});
