import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../client.ts';
import { loadConfig } from '../../../lib/config/config.ts';
import type { Listening } from '../../../lib/http/serve.ts';
import { startGateway } from '../../../mcp-gateway/server.ts';
import { startToolServer } from '../../../tool-server/server.ts';
import { startMcpHttpServer, text } from '../../helpers/mcp-http-server.ts';

// The desktop config people already have, imported with the real CLI into a real gateway (tool-server and
// gateway listening on ports, the repository's shipped toolsets/): every server loads under its own prefix
// next to the native file tools, nothing starts until it is used, and the files go to the user's toolsets
// directory (<data dir>/toolsets), never into the repository's toolsets/.

const FILES_SERVER = path.resolve('tests/fixtures/mcp/files-server.mjs');
const GITHUB_TOKEN = 'ghp_importimportimport0123456789';
const SHIPPED = path.resolve('toolsets');
const shippedFiles = () =>
  readdirSync(SHIPPED).map((f) => `${f}:${readFileSync(path.join(SHIPPED, f), 'utf8').length}`);

let tmp: string;
let env: Record<string, string>;
let running: Listening[] = [];
let search: Awaited<ReturnType<typeof startMcpHttpServer>>;
let shippedBefore: string[];

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'toolshift-import-'));
  await mkdir(path.join(tmp, 'workspace'));
  await mkdir(path.join(tmp, 'docs'));
  await writeFile(path.join(tmp, 'docs', 'notes.txt'), 'hello from the imported server\n');
  search = await startMcpHttpServer({
    tools: [
      {
        definition: { name: 'lookup', description: 'Look a term up', inputSchema: { type: 'object' } },
        run: () => text('found'),
      },
    ],
  });
  env = {
    AGENT_PORT: '0',
    GATEWAY_PORT: '0',
    TOOL_SERVER_PORT: '0',
    TOOLSHIFT_DATA_DIR: path.join(tmp, 'data'),
    TOOLSHIFT_AUTH: 'none',
    FS_ROOTS: path.join(tmp, 'workspace'),
    LOG_LEVEL: 'silent',
  };
  shippedBefore = shippedFiles();
});

afterAll(async () => {
  for (const s of running) await s.close();
  await search.close();
  delete process.env.GITHUB_PERSONAL_ACCESS_TOKEN;
  await rm(tmp, { recursive: true, force: true });
});

/** The tool-server and the gateway, as `npm start` runs them, on this test's data directory. */
async function startDaemon(extra: Record<string, string> = {}) {
  const tools = await startToolServer(loadConfig({ ...env, ...extra }));
  running.push(tools);
  const gateway = await startGateway(loadConfig({ ...env, ...extra, TOOL_SERVER_URL: tools.url }));
  running.push(gateway);
  return gateway.url;
}

async function stopDaemon() {
  for (const s of running.reverse()) await s.close();
  running = [];
}

/** The CLI as `toolshift …` runs it, against the gateway at `url`. */
async function cli(url: string, ...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    env: { ...env, GATEWAY_URL: url, PATH: process.env.PATH, HOME: tmp },
  });
  return { code, stdout, stderr };
}

async function api(url: string, route: string, body?: unknown) {
  const res = await fetch(`${url}${route}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as Record<string, any>;
}

const marker = () => path.join(tmp, 'started');

async function desktopConfig(servers: Record<string, unknown>) {
  const file = path.join(tmp, 'claude_desktop_config.json');
  await writeFile(file, JSON.stringify({ mcpServers: servers }, null, 2));
  return file;
}

describe('importing the servers of a desktop config', () => {
  it('loads every server under its prefix next to the native tools, starts none until used, and writes only the user directory', async () => {
    const url = await startDaemon();
    const config = await desktopConfig({
      filesystem: {
        command: 'node',
        args: [FILES_SERVER, path.join(tmp, 'docs')],
        env: { STARTED_MARKER: marker() },
      },
      github: {
        command: 'npx',
        args: ['-y', '@modelcontextprotocol/server-github'],
        env: { GITHUB_PERSONAL_ACCESS_TOKEN: GITHUB_TOKEN },
      },
      search: { type: 'http', url: search.url },
      'My Notes': { command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: path.join(tmp, 'notes.jsonl') } },
    });

    const imported = await cli(url, 'toolsets', 'import', config, '--no-connect');
    expect(imported.stderr).not.toContain('skipped');
    expect(imported.code).toBe(0);
    const userDir = path.join(tmp, 'data', 'toolsets');
    for (const id of ['filesystem', 'github', 'search', 'my_notes']) {
      expect(imported.stdout).toContain(
        `wrote ${userDir}/${id}.yaml (toolset ${id}, tools offered as ${id}_<tool>)`,
      );
    }
    expect(imported.stdout).toContain("set in the gateway's environment: GITHUB_PERSONAL_ACCESS_TOKEN");
    expect(imported.stdout).toContain(`Your toolsets live in ${userDir} (USER_TOOLSETS_DIR)`);
    expect(readdirSync(userDir).sort()).toEqual([
      'filesystem.yaml',
      'github.yaml',
      'my_notes.yaml',
      'search.yaml',
    ]);
    expect(readFileSync(path.join(userDir, 'filesystem.yaml'), 'utf8')).toContain('prefix: filesystem_\n');
    expect(readFileSync(path.join(userDir, 'github.yaml'), 'utf8')).not.toContain(GITHUB_TOKEN);
    expect(shippedFiles()).toEqual(shippedBefore);

    // The token is not in the gateway's environment yet: github is skipped, saying why; the rest load.
    const first = await cli(url, 'toolsets', 'reload');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('added: filesystem, my_notes, search\n');
    expect(first.stdout).toContain('upstream servers start on first use');
    // Which policy is in force, and from where: none here (POLICY_FILE's default, in the data directory).
    expect(first.stdout).toMatch(/^policy: \S+policy\.yaml: no file: everything allowed$/m);
    expect(first.stderr).toMatch(
      /^warning: .*github\.yaml:\d+: variable GITHUB_PERSONAL_ACCESS_TOKEN is not set .*\(this file is skipped; the other toolsets load\)\n$/,
    );
    process.env.GITHUB_PERSONAL_ACCESS_TOKEN = GITHUB_TOKEN;
    const second = await cli(url, 'toolsets', 'reload');
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect(second.stdout).toContain('added: github\n');

    // Nothing started: not the script (its marker), not npx, not the URL server, not the memory server.
    expect(existsSync(marker())).toBe(false);
    expect(search.state.requests).toEqual([]);
    const upstreams = (await api(url, '/health')).upstreams as Record<string, { state: string }>;
    expect(Object.values(upstreams).map((u) => u.state)).toEqual(Object.values(upstreams).map(() => 'idle'));
    const listed = await cli(url, 'toolsets', 'list');
    expect(listed.stdout).toMatch(/^filesystem +tools on first use +The MCP server "filesystem"/m);
    expect(listed.stdout).toMatch(/^github +tools on first use/m);

    // Activated (used): the server starts, and its tools are offered under its prefix beside the native ones.
    const on = await cli(url, 'toolsets', 'activate', 'filesystem', 'file_system_tools', '--session', 'imp');
    expect(on.code).toBe(0);
    expect(existsSync(marker())).toBe(true);
    const tools = ((await api(url, '/mcp/tools?session_id=imp')).tools as { name: string }[]).map(
      (t) => t.name,
    );
    expect(tools).toEqual(
      expect.arrayContaining([
        'filesystem_read_text_file',
        'filesystem_list_directory',
        'read_text_file',
        'list_directory',
      ]),
    );
    const read = await api(url, '/mcp/tools/filesystem_read_text_file/call', {
      session_id: 'imp',
      arguments: { path: 'notes.txt' },
    });
    expect(read).toMatchObject({ success: true, result: 'hello from the imported server\n' });

    // The name with spaces and the URL server load under their prefixes too.
    const more = await api(url, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['my_notes', 'search'],
      session_id: 'imp',
    });
    expect(more.added_tools).toEqual(expect.arrayContaining(['my_notes_create_entities', 'search_lookup']));
    expect(more.added_tools.every((n: string) => /^(my_notes|search)_/.test(n))).toBe(true);
    expect(shippedFiles()).toEqual(shippedBefore);

    // A hand-written toolset that still collides is skipped with a warning naming its tools and the fix;
    // the rest of the reload goes through.
    const raw = readFileSync(path.join(userDir, 'filesystem.yaml'), 'utf8')
      .replace('id: filesystem', 'id: raw_files')
      .replace('prefix: filesystem_\n', '');
    await writeFile(path.join(userDir, 'raw_files.yaml'), raw);
    await writeFile(
      path.join(userDir, 'my_reader.yaml'),
      'id: my_reader\ndescription: Read text files.\ntools: [read_text_file, get_file_info]\n',
    );
    await writeFile(
      path.join(userDir, 'search.yaml'),
      readFileSync(path.join(userDir, 'search.yaml'), 'utf8').replace(
        /^description: .*$/m,
        'description: Look terms up.',
      ),
    );
    const clash = await cli(url, 'toolsets', 'reload');
    expect(clash.code).toBe(0);
    expect(clash.stdout).toContain('added: my_reader, raw_files\nchanged: search\n');
    expect(clash.stderr).toContain(
      `warning: toolset raw_files is skipped (it offers no tools): ${userDir}/raw_files.yaml: node ${FILES_SERVER} ${path.join(tmp, 'docs')} offers tool names another toolset already offers: read_text_file, list_directory (toolset file_system_tools, ${SHIPPED}/file_system_tools.yaml); add prefix: raw_files_ to ${userDir}/raw_files.yaml (its tools are then offered as raw_files_<tool>)\n`,
    );
    expect(clash.stderr).toContain(
      `warning: toolset my_reader is skipped (it offers no tools): ${userDir}/my_reader.yaml: tool-server offers tool names another toolset already offers: read_text_file, get_file_info (toolset file_system_tools, ${SHIPPED}/file_system_tools.yaml); remove them from the tools of ${userDir}/my_reader.yaml or of the other toolset\n`,
    );
    const after = await cli(url, 'toolsets', 'list');
    expect(after.stdout).toMatch(/^my_reader .*\[error: .*read_text_file, get_file_info/m);
    const refused = await cli(url, 'toolsets', 'activate', 'raw_files', '--session', 'imp');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('add prefix: raw_files_');

    // The same files at the next start, and one that cannot load: the gateway starts, skips what collides
    // or does not load, and starts no server.
    await writeFile(
      path.join(userDir, 'broken.yaml'),
      `id: broken\ndescription: x\nvariables: [NOT_SET_ANYWHERE]\nbackend:\n  mcp:\n    url: \${NOT_SET_ANYWHERE}\n`,
    );
    await stopDaemon();
    await rm(marker());
    const restarted = await startDaemon();
    const ids = (
      (await api(restarted, '/mcp/admin/toolsets')).toolsets as { id: string; health?: string }[]
    ).map((t) => `${t.id}${t.health === 'error' ? ' (error)' : ''}`);
    expect(ids).toEqual(
      expect.arrayContaining([
        'filesystem',
        'github',
        'my_notes',
        'search',
        'my_reader (error)',
        'file_system_tools',
      ]),
    );
    expect(ids).not.toContain('broken');
    expect(existsSync(marker())).toBe(false);
    expect(shippedFiles()).toEqual(shippedBefore);
    await stopDaemon();
  });
});
