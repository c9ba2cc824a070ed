import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentServer } from '../../agent-server/server.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { startGateway } from '../../mcp-gateway/server.ts';
import { startToolServer } from '../../tool-server/server.ts';

// Start-up errors that say what to change: each names the variable (and the path) to fix.

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-startup-'));
  await mkdir(path.join(tmp, 'workspace'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const base = () => ({
  AGENT_PORT: '0',
  GATEWAY_PORT: '0',
  TOOL_SERVER_PORT: '0',
  TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
  FS_ROOTS: path.join(tmp, 'workspace'),
  LOG_LEVEL: 'silent',
});

/** A Node older than toolshift supports, if this machine has one (CI's own Node 20 runs npm there). */
const oldNode = ['/usr/bin/node', '/usr/local/bin/node'].find((bin) => {
  const run = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  const [major, minor] = (run.stdout ?? '').trim().slice(1).split('.').map(Number);
  return run.status === 0 && (major < 22 || (major === 22 && minor < 18));
});

describe('start-up errors', () => {
  it.skipIf(oldNode === undefined)(
    'on an unsupported Node, stops with one line naming the Node it needs',
    () => {
      for (const args of [['serve'], ['--version']]) {
        const run = spawnSync(oldNode as string, ['bin/toolshift.js', ...args], {
          encoding: 'utf8',
          env: { PATH: process.env.PATH, HOME: tmp, ...base() },
        });
        expect(run.status).toBe(1);
        expect(run.stdout).toBe('');
        expect(run.stderr).toMatch(
          /^toolshift needs Node\.js 22\.18 or newer on the 22 line, 24, or 26 and later; this is Node \d+\.\d+\.\d+\n$/,
        );
      }
    },
  );

  it('refuses an OPENAI_BASE_URL that is not an http(s) URL, naming the variable (and npm start exits 1 saying so)', async () => {
    for (const bad of ['localhost:11434/v1', 'ftp://models.example/v1', 'not a url']) {
      expect(() => loadConfig({ ...base(), OPENAI_BASE_URL: bad })).toThrow(
        /Invalid configuration:\n {2}OPENAI_BASE_URL: must be an http\(s\) URL of an OpenAI-compatible API, e\.g\. http:\/\/127\.0\.0\.1:11434\/v1/,
      );
    }
    expect(loadConfig({ ...base(), OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1' }).agent.model.baseURL).toBe(
      'http://127.0.0.1:11434/v1',
    );
    const child = spawn(process.execPath, ['start/start.ts'], {
      env: { PATH: process.env.PATH, HOME: tmp, ...base(), OPENAI_BASE_URL: 'localhost:11434' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c;
    });
    expect(await new Promise((r) => child.on('exit', r))).toBe(1);
    expect(stderr).toMatch(
      /^toolshift failed to start: Invalid configuration:\n {2}OPENAI_BASE_URL: must be an http\(s\) URL/,
    );
  });

  it('names the path and TOOLSHIFT_DATA_DIR when the data directory cannot be written', async () => {
    const file = path.join(tmp, 'a-file');
    await writeFile(file, 'not a directory');
    const config = loadConfig({ ...base(), TOOLSHIFT_DATA_DIR: path.join(file, 'data') });
    await expect(startAgentServer(config)).rejects.toThrow(
      `Cannot write the data directory ${path.join(file, 'data')} (ENOTDIR): make it writable, or set TOOLSHIFT_DATA_DIR to a directory toolshift may write.`,
    );
    await expect(startGateway(config)).rejects.toThrow(
      /Cannot write the data directory .* TOOLSHIFT_DATA_DIR/,
    );
  });

  it('names the port variable and asks whether toolshift is already running when a port is taken', async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as { port: number }).port;
    try {
      await expect(startAgentServer(loadConfig({ ...base(), AGENT_PORT: String(port) }))).rejects.toThrow(
        `Port ${port} on 127.0.0.1 is already in use (AGENT_PORT=${port}). Is toolshift already running? Stop it, or set AGENT_PORT to a free port.`,
      );
      await expect(
        startToolServer(loadConfig({ ...base(), TOOL_SERVER_PORT: String(port) })),
      ).rejects.toThrow(/\(TOOL_SERVER_PORT=\d+\)\. Is toolshift already running\?/);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  });

  it('refuses FS_ROOTS and FS_READONLY_ROOTS entries that do not exist instead of creating them', async () => {
    const missing = path.join(tmp, 'no-such-root');
    await expect(startToolServer(loadConfig({ ...base(), FS_ROOTS: missing }))).rejects.toThrow(
      `FS_ROOTS entry ${missing} does not exist: create the directory or correct the variable (roots are never created for you).`,
    );
    await expect(
      startToolServer(loadConfig({ ...base(), FS_READONLY_ROOTS: path.join(tmp, 'no-such-docs') })),
    ).rejects.toThrow(/^FS_READONLY_ROOTS entry .*no-such-docs does not exist/);
    const { existsSync } = await import('node:fs');
    expect(existsSync(missing)).toBe(false);
  });

  it('refuses a toolset file with an unknown key, naming the file and the key', async () => {
    const dir = path.join(tmp, 'toolsets');
    await mkdir(dir);
    await writeFile(path.join(dir, 'notes.yaml'), 'id: notes\ndescription: Notes.\ntool: [read_text_file]\n');
    await expect(startGateway(loadConfig({ ...base(), TOOLSETS_DIR: dir }))).rejects.toThrow(
      /notes\.yaml.*unknown key tool; a toolset file has id, description, keywords, default, backend, tools/,
    );
  });
});
