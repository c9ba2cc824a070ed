import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../../client.ts';
import { NO_STORED_CREDENTIALS } from '../../helpers/credentials.ts';
import { asLoopback, makeStack, type Stack } from '../../helpers/stack.ts';

// A user toolset with the id of a shipped one: `toolsets import` does not take a shipped id without --force;
// with it, the user's file replaces the shipped toolset (until it is removed again). The repository's own
// toolsets/ is never written.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

async function cli(s: Stack, ...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    env: {
      ...NO_STORED_CREDENTIALS,
      GATEWAY_URL: 'http://gateway',
      TOOLSETS_DIR: s.toolsetsDir,
      USER_TOOLSETS_DIR: s.userToolsetsDir,
      PATH: process.env.PATH,
      HOME: process.env.HOME,
    },
    fetch: async (url, init) => s.gatewayApp.request(asLoopback(url), init),
  });
  return { code, stdout, stderr };
}

describe('a user toolset with a shipped id', () => {
  it('is not imported without --force; with it, it replaces the shipped toolset until removed', async () => {
    stack = await makeStack();
    const s = stack;
    const shipped = path.resolve('toolsets');
    expect(s.toolsetsDir).toBe(shipped);
    const before = readdirSync(shipped).map((f) => readFileSync(path.join(shipped, f), 'utf8'));
    const tmp = await mkdtemp(path.join(tmpdir(), 'import-override-'));
    const mine = path.join(tmp, 'mine.jsonl');
    const config = path.join(tmp, 'claude_desktop_config.json');
    await writeFile(
      config,
      JSON.stringify({
        mcpServers: { memory: { command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: mine } } },
      }),
    );
    const userFile = path.join(s.userToolsetsDir, 'memory.yaml');

    const refused = await cli(s, 'toolsets', 'import', config, '--no-connect');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `skipped memory: toolset id memory is shipped with toolshift (${shipped}/memory.yaml); rename the server in claude_desktop_config.json, or use --force to write ${userFile}, which then replaces the shipped toolset\n`,
    );
    expect(existsSync(userFile)).toBe(false);

    const forced = await cli(s, 'toolsets', 'import', config, '--no-connect', '--force');
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain(`wrote ${userFile} (toolset memory, tools offered as memory_<tool>)`);
    expect((await cli(s, 'toolsets', 'reload')).stdout).toContain('changed: memory\n');
    const listed = (await s.get(s.gatewayApp, '/mcp/admin/toolsets')).body.toolsets;
    expect(listed.filter((t: { id: string }) => t.id === 'memory')).toEqual([
      expect.objectContaining({
        backend: { mcp: { command: 'mcp-server-memory', env: { MEMORY_FILE_PATH: mine } } },
      }),
    ]);
    const on = await s.gateway.changeToolsets({
      action: 'ACTIVATE',
      toolset_ids: ['memory'],
      session_id: 'm',
    });
    expect(on.added_tools).toContain('memory_create_entities');
    await s.gateway.callTool('m', 'memory_create_entities', {
      entities: [{ name: 'Ann', entityType: 'person', observations: ['prefers tea'] }],
    });
    expect(readFileSync(mine, 'utf8')).toContain('Ann');

    // Removed again: the shipped toolset is back, under its own names.
    await rm(userFile);
    expect((await cli(s, 'toolsets', 'reload')).stdout).toContain('changed: memory\n');
    const back = await s.gateway.changeToolsets({
      action: 'ACTIVATE',
      toolset_ids: ['memory'],
      session_id: 'n',
    });
    expect(back.added_tools).toContain('create_entities');
    expect(readdirSync(shipped).map((f) => readFileSync(path.join(shipped, f), 'utf8'))).toEqual(before);
    await rm(tmp, { recursive: true, force: true });
  });
});

describe('a default toolset in the user directory', () => {
  it('has its server started by the reload, as the start does; a non-default one waits for first use', async () => {
    stack = await makeStack({
      toolsets: { 'files.yaml': 'id: files\ndescription: Read files.\ntools: [read_text_file]\n' },
    });
    const s = stack;
    const tmp = await mkdtemp(path.join(tmpdir(), 'import-default-'));
    const file = (id: string, isDefault: boolean) =>
      `id: ${id}\ndescription: Docs.\ndefault: ${isDefault}\nprefix: ${id}_\nbackend:\n  mcp:\n    command: node\n    args: [${JSON.stringify(path.resolve('tests/fixtures/mcp/files-server.mjs'))}, ${JSON.stringify(tmp)}]\n    env:\n      STARTED_MARKER: ${JSON.stringify(path.join(tmp, `${id}.started`))}\n`;
    await mkdir(s.userToolsetsDir, { recursive: true });
    await writeFile(path.join(s.userToolsetsDir, 'later.yaml'), file('later', false));
    await writeFile(path.join(s.userToolsetsDir, 'now.yaml'), file('now', true));
    const res = await cli(s, 'toolsets', 'reload');
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toContain('added: later, now\n');
    expect(existsSync(path.join(tmp, 'now.started'))).toBe(true);
    expect(existsSync(path.join(tmp, 'later.started'))).toBe(false);
    expect(s.catalog.toolset('now')?.tools).toEqual(['now_read_text_file', 'now_list_directory']);
    await rm(tmp, { recursive: true, force: true });
  });
});
