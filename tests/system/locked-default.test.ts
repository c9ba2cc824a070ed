import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { loadOrCreateCredentials, withCredentials } from '../../lib/config/credentials.ts';
import { startToolServer } from '../../tool-server/server.ts';
import { bearerOf, storedToken } from '../helpers/credentials.ts';
import { type ServiceName, startDaemon } from '../helpers/daemon.ts';

// Locked by default: npm start on a fresh data directory makes a token per role into a file only its user
// can read, and every route but /health of every service then needs one — the tool-server's too, so another
// local process cannot write files through it. The CLI finds the tokens without being given one.

const run = promisify(execFile);
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'locked-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A non-health route of each service, as an attacker on the machine would call it. */
const PROBES: Record<ServiceName, { path: string; init: RequestInit }> = {
  'agent-server': { path: '/agent/tasks', init: {} },
  'mcp-gateway': { path: '/mcp/admin/toolsets', init: {} },
  'tool-server': {
    path: '/tools/write_file',
    init: {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ path: 'pwned.txt', content: 'x' }),
    },
  },
};

describe('a fresh install', () => {
  it('makes its credentials, refuses every unauthenticated call, and the CLI needs no token', async () => {
    const data = path.join(tmp, 'fresh', 'data');
    const ws = path.join(tmp, 'fresh', 'ws');
    await mkdir(ws, { recursive: true });
    const env = { TOOLSHIFT_DATA_DIR: data, FS_ROOTS: ws, HOME: tmp };
    const daemon = startDaemon(env);
    try {
      const urls = await daemon.listening;
      const file = path.join(data, 'credentials.json');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      for (const [service, probe] of Object.entries(PROBES)) {
        const res = await fetch(`${urls[service as ServiceName]}${probe.path}`, probe.init);
        expect(res.status, service).toBe(401);
        // /health still says the service is up, without a token.
        expect((await fetch(`${urls[service as ServiceName]}/health`)).status).toBe(200);
      }
      expect(existsSync(path.join(ws, 'pwned.txt'))).toBe(false);
      // The gateway's hop to the tool-server is authenticated with the generated token.
      const direct = await fetch(`${urls['tool-server']}/tools/write_file`, {
        ...PROBES['tool-server'].init,
        headers: { 'content-type': 'application/json', ...bearerOf(data, 'TOOL_SERVER_TOKEN') },
      });
      expect(((await direct.json()) as { success: boolean }).success).toBe(true);
      // The CLI, as a user runs it: no token in its environment, only where the daemon is.
      const cliEnv = {
        PATH: process.env.PATH,
        HOME: tmp,
        TOOLSHIFT_DATA_DIR: data,
        GATEWAY_URL: urls['mcp-gateway'],
        AGENT_URL: urls['agent-server'],
      };
      const toolsets = await run(process.execPath, ['client.ts', 'toolsets', '--json'], {
        env: cliEnv,
      });
      expect(JSON.parse(toolsets.stdout).toolsets.map((t: { id: string }) => t.id)).toContain(
        'file_system_tools',
      );
      const tasks = await run(process.execPath, ['client.ts', 'tasks', '--json'], {
        env: cliEnv,
      });
      expect(JSON.parse(tasks.stdout)).toBeDefined();
      const token = await run(process.execPath, ['client.ts', 'token'], { env: cliEnv });
      expect(token.stdout.trim()).toBe(storedToken(data, 'AGENT_API_TOKEN'));
      const api = await fetch(`${urls['agent-server']}/agent/tasks`, {
        headers: { authorization: `Bearer ${token.stdout.trim()}` },
      });
      expect(api.status).toBe(200);
      // Where the credentials are and how to use them is printed at start.
      // (HOME is the test's directory: a path in it is printed as the user would type it, from ~.)
      expect(daemon.stderr()).toContain(`credentials in ~/${path.relative(tmp, file)};`);
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
    // A second start keeps the same tokens (clients configured with them keep working).
    const before = storedToken(data, 'GATEWAY_ADMIN_TOKEN');
    const again = startDaemon(env);
    try {
      const urls = await again.listening;
      const res = await fetch(`${urls['mcp-gateway']}/mcp/admin/toolsets`, {
        headers: bearerOf(data, 'GATEWAY_ADMIN_TOKEN'),
      });
      expect(res.status).toBe(200);
      expect(storedToken(data, 'GATEWAY_ADMIN_TOKEN')).toBe(before);
    } finally {
      await again.stop();
    }
  }, 60_000);

  it('opens only with TOOLSHIFT_AUTH=none, and writes no credentials then', async () => {
    const data = path.join(tmp, 'open', 'data');
    const ws = path.join(tmp, 'open', 'ws');
    await mkdir(ws, { recursive: true });
    const daemon = startDaemon({ TOOLSHIFT_DATA_DIR: data, FS_ROOTS: ws, HOME: tmp, TOOLSHIFT_AUTH: 'none' });
    try {
      const urls = await daemon.listening;
      expect((await fetch(`${urls['mcp-gateway']}/mcp/admin/toolsets`)).status).toBe(200);
      expect(existsSync(path.join(data, 'credentials.json'))).toBe(false);
      expect(daemon.stderr()).toContain('TOOLSHIFT_AUTH=none');
    } finally {
      await daemon.stop();
    }
  }, 60_000);
});

describe('the credentials file', () => {
  it('cannot be read by any file tool, even where a root covers the data directory', async () => {
    const project = path.join(tmp, 'readable');
    await mkdir(project, { recursive: true });
    const config = withCredentials(
      loadConfig({
        TOOL_SERVER_PORT: '0',
        LOG_LEVEL: 'silent',
        FS_ROOTS: project,
        TOOLSHIFT_DATA_DIR: path.join(project, 'data'),
      }),
    );
    const server = await startToolServer(config);
    try {
      const token = storedToken(path.join(project, 'data'), 'GATEWAY_ADMIN_TOKEN');
      for (const [tool, args] of [
        ['read_text_file', { path: 'data/credentials.json' }],
        ['read_multiple_files', { paths: ['data/credentials.json'] }],
        ['read_media_file', { path: 'data/credentials.json' }],
      ] as const) {
        const res = await fetch(`${server.url}/tools/${tool}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${config.tools.token}` },
          body: JSON.stringify(args),
        });
        const text = await res.text();
        expect(text, tool).not.toContain(token);
        expect(text, tool).toContain("holds toolshift's credentials");
      }
    } finally {
      await server.close();
    }
  });

  it("is made once, by whichever start comes first, with a distinct token per role (and the webhooks' and seal's secrets)", async () => {
    const file = path.join(tmp, 'race', 'credentials.json');
    const all = Array.from({ length: 8 }, () => loadOrCreateCredentials(file));
    for (const tokens of all) expect(tokens).toEqual(all[0]);
    expect(new Set(Object.values(all[0])).size).toBe(8);
    expect(all[0].GATEWAY_SEAL_KEY).toMatch(/^ts_seal_[A-Za-z0-9_-]{32}$/);
    // The webhooks' signing secret, in Standard Webhooks' format (32 random bytes).
    expect(all[0].AGENT_WEBHOOK_SECRET).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('lets the environment win per variable', () => {
    const dir = path.join(tmp, 'env');
    const config = withCredentials(
      loadConfig({ TOOLSHIFT_DATA_DIR: dir, GATEWAY_ADMIN_TOKEN: 'admin-from-the-environment' }),
    );
    expect(config.gateway.adminToken).toBe('admin-from-the-environment');
    expect(config.tools.token).toBe(storedToken(dir, 'TOOL_SERVER_TOKEN'));
  });

  it('is refused when other users can read it, saying how to fix it', async () => {
    const file = path.join(tmp, 'race', 'credentials.json');
    await chmod(file, 0o644);
    expect(() => loadOrCreateCredentials(file)).toThrow(
      `the credentials file ${file} can be read by other users (mode 644): run chmod 600 ${file}`,
    );
  });
});
