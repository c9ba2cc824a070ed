import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import type { Listening } from '../../lib/http/serve.ts';
import { legacySessionKey } from '../../mcp-gateway/face/legacy-store.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { SPLIT_TOOLSETS } from '../helpers/stack.ts';

// Issue 16: a gateway restart lost every legacy MCP session and its active toolsets, and the v1 SDK client
// (as desktop clients embed it) does not initialize again by itself: the user had to reconnect the client by
// hand. The sessions are kept in the gateway's database (the session id only as its SHA-256, bound to the
// credential), so the same client's next request after a restart is served, its toolsets still active.

const MCP_TOKEN = 'mcp-token-restart-123';
const ADMIN_TOKEN = 'admin-token-restart-456';
const AGENT_TOKEN = 'agent-token-restart-789';

let tmp: string | undefined;
const running: Listening[] = [];
afterEach(async () => {
  for (const s of running.splice(0).reverse()) await s.close().catch(() => undefined);
  if (tmp) await rm(tmp, { recursive: true, force: true });
  tmp = undefined;
});

type Result = { content?: unknown; isError?: boolean };
const text = (r: Result) => ((r.content as { text: string }[])[0] ?? { text: '' }).text;

/** Every file of the data directory, as bytes. */
async function dataDirBytes(dir: string): Promise<Buffer> {
  const names = await readdir(dir);
  return Buffer.concat(await Promise.all(names.map((n) => readFile(path.join(dir, n)))));
}

describe('a legacy session across a gateway restart', () => {
  it('v1 SDK client: the same client’s next request after the restart works, its toolset still active', async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-mcp-restart-'));
    const workspace = path.join(tmp, 'workspace');
    const toolsets = path.join(tmp, 'toolsets');
    const dataDir = path.join(tmp, 'data');
    await mkdir(workspace);
    await mkdir(toolsets);
    for (const [name, body] of Object.entries(SPLIT_TOOLSETS))
      await writeFile(path.join(toolsets, name), body);
    const env = {
      HOST: '127.0.0.1',
      GATEWAY_PORT: '0',
      TOOL_SERVER_PORT: '0',
      TOOLSHIFT_DATA_DIR: dataDir,
      TOOLSETS_DIR: toolsets,
      FS_ROOTS: workspace,
      LOG_LEVEL: 'silent',
      GATEWAY_MCP_TOKEN: MCP_TOKEN,
      GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
      GATEWAY_AGENT_TOKEN: AGENT_TOKEN,
    };
    const tools = await startToolServer(loadConfig(env));
    running.push(tools);
    const gatewayOn = async (port: number) => {
      const g = await startGateway(
        loadConfig({ ...env, TOOL_SERVER_URL: tools.url, GATEWAY_PORT: String(port) }),
        { backendWaitMs: 5000 },
      );
      running.push(g);
      return g;
    };
    const first = await gatewayOn(0);
    const url = `${first.url}/mcp`;

    const client = new Client({ name: 'desktop-like', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${MCP_TOKEN}` } },
      // The v1 client re-opens its event stream after the restart; no waiting in between in the test.
      reconnectionOptions: {
        initialReconnectionDelay: 50,
        maxReconnectionDelay: 200,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 20,
      },
    });
    const clientErrors: Error[] = [];
    client.onerror = (err) => clientErrors.push(err);
    await client.connect(transport);
    const sessionId = transport.sessionId as string;
    expect(sessionId).toMatch(/^mcp_/);
    const activated = (await client.callTool({
      name: 'manage_toolsets',
      arguments: { action: 'ACTIVATE', toolset_ids: ['fs_write'] },
    })) as Result;
    expect(activated.isError, text(activated)).toBeFalsy();
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('write_file');

    // The gateway stops and starts again on the same data directory and port.
    await first.close();
    running.splice(running.indexOf(first), 1);
    const second = await gatewayOn(first.port);
    expect(second.url).toBe(first.url);

    // The same client, not reconnected: its session id still works, and fs_write is still active.
    expect(transport.sessionId).toBe(sessionId);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual([
      'manage_toolsets',
      'call_tool',
      'write_file',
      'edit_file',
      'delete_file',
    ]);
    const written = (await client.callTool({
      name: 'write_file',
      arguments: { path: 'after-restart.txt', content: 'served again' },
    })) as Result;
    expect(written.isError, text(written)).toBeFalsy();
    expect(await readFile(path.join(workspace, 'after-restart.txt'), 'utf8')).toBe('served again');
    expect(clientErrors.filter((e) => /404|not found/i.test(e.message))).toEqual([]);

    // Bound to the credential: the operator's token does not get this session, before or after a restart.
    const foreign = await fetch(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sessionId,
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
    });
    expect(foreign.status).toBe(404);

    // The session id is a bearer secret: nothing in the data directory holds it, only its hash.
    await client.close();
    await second.close();
    running.splice(running.indexOf(second), 1);
    const bytes = await dataDirBytes(dataDir);
    expect(bytes.includes(sessionId)).toBe(false);
    expect(bytes.includes(legacySessionKey(sessionId))).toBe(true);
  }, 60_000);
});
