import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Attack on issue 32 item 1: the real `toolshift` CLI (bin/toolshift.js, a child process) run by a user whose
// data directory holds the daemon's tokens and recorded addresses, from a repository that tries to point it at
// a listener of its choosing (its .env), or with an environment URL spelled so that it may look like the
// recorded daemon (trailing dot, IPv6 loopback, userinfo, `localhost`). The listener must receive no stored
// token, in a header or in a body; the recorded daemon may.

const REPO = path.resolve(import.meta.dirname, '../..');
const tmp = mkdtempSync(path.join(tmpdir(), 'toolshift-cli-attack-'));
const TOKENS = {
  AGENT_API_TOKEN: 'ts_api_storedAgentApiToken0123456789abcdef',
  GATEWAY_ADMIN_TOKEN: 'ts_admin_storedGatewayAdminToken0123456789',
  GATEWAY_AGENT_TOKEN: 'ts_agent_storedGatewayAgentToken0123456789',
  GATEWAY_MCP_TOKEN: 'ts_mcp_storedGatewayMcpToken0123456789abcd',
  VIEWER_TOKEN: 'ts_viewer_storedViewerToken0123456789abcdef',
  TOOL_SERVER_TOKEN: 'ts_toolserver_storedToolServerToken01234567',
};
const SECRETS = Object.values(TOKENS);

interface Seen {
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}
function recorder(host = '127.0.0.1'): Promise<{ server: Server; port: number; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers, body });
      res.writeHead(401, { 'content-type': 'application/json', 'x-toolshift-service': 'agent-server' });
      res.end('{"error":"no"}');
    });
  });
  return new Promise((resolve) =>
    server.listen(0, host, () => resolve({ server, port: (server.address() as AddressInfo).port, seen })),
  );
}

let evil: Awaited<ReturnType<typeof recorder>>;
let evil6: Awaited<ReturnType<typeof recorder>> | undefined;
let daemon: Awaited<ReturnType<typeof recorder>>;
const dataDir = path.join(tmp, 'data');
const repo = path.join(tmp, 'someones-repo');

beforeAll(async () => {
  evil = await recorder();
  try {
    evil6 = await recorder('::1');
  } catch {
    evil6 = undefined;
  }
  daemon = await recorder();
  mkdirSync(dataDir, { mode: 0o700 });
  writeFileSync(path.join(dataDir, 'credentials.json'), JSON.stringify(TOKENS), { mode: 0o600 });
  const recorded = `http://127.0.0.1:${daemon.port}`;
  writeFileSync(
    path.join(dataDir, 'addresses.json'),
    JSON.stringify({ 'agent-server': [recorded], 'mcp-gateway': [recorded] }),
    { mode: 0o600 },
  );
  mkdirSync(repo);
  const at = `http://127.0.0.1:${evil.port}`;
  writeFileSync(
    path.join(repo, '.env'),
    [
      `AGENT_URL=${at}`,
      `GATEWAY_URL=${at}`,
      `HOST=127.0.0.1`,
      `AGENT_PORT=${evil.port}`,
      `GATEWAY_PORT=${evil.port}`,
      `NODE_OPTIONS=--require ${path.join(repo, 'x.cjs')}`,
    ].join('\n'),
  );
});

afterAll(() => {
  evil?.server.close();
  evil6?.server.close();
  daemon?.server.close();
  rmSync(tmp, { recursive: true, force: true });
});

function cli(args: string[], env: Record<string, string> = {}, cwd = repo) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [path.join(REPO, 'bin/toolshift.js'), ...args], {
      cwd,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: tmp,
        TOOLSHIFT_DATA_DIR: dataDir,
        TOOLSHIFT_RECONNECT_S: '0',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

const leaked = (seen: Seen[]) =>
  seen.filter((s) => SECRETS.some((t) => JSON.stringify(s.headers).includes(t) || s.body.includes(t)));

const COMMANDS = [['toolsets'], ['tasks'], ['console'], ['console', 'viewer'], ['audit'], ['approvals']];

describe('stored tokens and a listener the user did not choose', () => {
  it("the current directory's .env points nowhere: the stored tokens go only to the recorded daemon", async () => {
    for (const args of COMMANDS) await cli(args);
    expect(leaked(evil.seen)).toEqual([]);
    expect(evil.seen).toEqual([]);
    // Control: the recorded daemon did get them (the CLI was not simply failing before sending anything).
    expect(leaked(daemon.seen).length).toBeGreaterThan(0);
  }, 120_000);

  it('environment URLs spelled like the recorded daemon but elsewhere get no stored token', async () => {
    const forms = [
      `http://127.0.0.1.:${evil.port}`,
      `http://localhost:${evil.port}`,
      `http://user:pw@127.0.0.1:${evil.port}`,
      `http://127.0.0.1:${daemon.port}@127.0.0.1:${evil.port}`,
      `http://0x7f000001:${evil.port}`,
      `http://2130706433:${evil.port}`,
      `http://127.1:${evil.port}`,
      ...(evil6 ? [`http://[::1]:${evil6.port}`, `http://[::ffff:127.0.0.1]:${evil.port}`] : []),
    ];
    for (const url of forms) {
      for (const args of [['toolsets'], ['console']]) {
        const r = await cli(args, { AGENT_URL: url, GATEWAY_URL: url });
        expect(r.stderr, url).toMatch(/not sending the stored|must be an http/);
      }
    }
    expect(leaked(evil.seen)).toEqual([]);
    expect(leaked(evil6?.seen ?? [])).toEqual([]);
  }, 120_000);

  it('HOST and ports in the environment with nothing recorded get no stored token', async () => {
    const empty = path.join(tmp, 'data-unrecorded');
    mkdirSync(empty, { mode: 0o700 });
    writeFileSync(path.join(empty, 'credentials.json'), JSON.stringify(TOKENS), { mode: 0o600 });
    for (const args of [['toolsets'], ['console'], ['tasks']]) {
      await cli(args, {
        TOOLSHIFT_DATA_DIR: empty,
        HOST: '127.0.0.1',
        AGENT_PORT: String(evil.port),
        GATEWAY_PORT: String(evil.port),
      });
    }
    expect(leaked(evil.seen)).toEqual([]);
  }, 60_000);

  it('an addresses.json that is a symlink to a file naming the listener is refused', async () => {
    const other = path.join(tmp, 'data-symlinked');
    mkdirSync(other, { mode: 0o700 });
    writeFileSync(path.join(other, 'credentials.json'), JSON.stringify(TOKENS), { mode: 0o600 });
    const planted = path.join(tmp, 'planted.json');
    const at = `http://127.0.0.1:${evil.port}`;
    writeFileSync(planted, JSON.stringify({ 'agent-server': [at], 'mcp-gateway': [at] }), { mode: 0o600 });
    chmodSync(planted, 0o600);
    symlinkSync(planted, path.join(other, 'addresses.json'));
    for (const args of [['toolsets'], ['console']]) await cli(args, { TOOLSHIFT_DATA_DIR: other });
    expect(leaked(evil.seen)).toEqual([]);
  }, 60_000);
});
