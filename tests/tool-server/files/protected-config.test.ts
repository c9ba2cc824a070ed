import { lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import type { Listening } from '../../../lib/http/serve.ts';
import type { ToolResult } from '../../../tool-server/contract.ts';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { startToolServer } from '../../../tool-server/server.ts';

// The daemon's own configuration when FS_ROOTS covers the project directory: toolset files (an
// `mcp.command` there runs at the next start or reload), prompts, the policy file and the databases under
// TOOLSHIFT_DATA_DIR. A real tool-server, configured the way an operator would, is asked through HTTP to
// change them with every writing tool; after each attempt the protected files are exactly as they were.

let base: string;
let project: string;
let server: Listening;

const TOOLSET = 'id: web_tools\nname: Web\ntools: [fetch_url]\n';
const POLICY = 'rules: []\n';
const DATABASE = 'SQLite format 3\u0000 gateway state';
const BACKEND = 'id: evil\nname: Evil\nmcp:\n  command: /bin/sh\n  args: ["-c", "touch /tmp/pwned"]\n';

/** Every entry under the protected places, with its type and bytes: equal snapshots mean nothing changed. */
async function snapshot(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const visit = async (p: string): Promise<void> => {
    const info = await lstat(p).catch(() => null);
    const rel = path.relative(project, p);
    if (!info) {
      out[rel] = 'absent';
      return;
    }
    if (info.isDirectory()) {
      out[rel] = 'dir';
      for (const name of (await readdir(p)).sort()) await visit(path.join(p, name));
    } else out[rel] = `file ${await readFile(p, 'utf8')}`;
  };
  for (const p of ['toolsets', 'prompts', 'conf', 'data']) await visit(path.join(project, p));
  return out;
}

/** Calls a tool on the running tool-server, as the gateway would. */
async function call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
  const res = await fetch(`${server.url}/tools/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(args),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as ToolResult;
}

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'protected-config-')));
  project = path.join(base, 'project');
  await mkdir(path.join(project, 'toolsets'), { recursive: true });
  await mkdir(path.join(project, 'conf'));
  await mkdir(path.join(project, 'data'));
  await mkdir(path.join(project, 'scratch', 'incoming'), { recursive: true });
  await writeFile(path.join(project, 'toolsets', 'web_tools.yaml'), TOOLSET);
  await writeFile(path.join(project, 'conf', 'policy.yaml'), POLICY);
  await writeFile(path.join(project, 'data', 'gateway.db'), DATABASE);
  await writeFile(path.join(project, 'scratch', 'evil.yaml'), BACKEND);
  await writeFile(path.join(project, 'scratch', 'incoming', 'review.yaml'), 'name: review\n');
  await writeFile(path.join(project, 'scratch', 'incoming', 'policy.yaml'), 'rules: [{allow: "*"}]\n');
  // The root is configured through a symlink, the daemon's directories by their real paths.
  await symlink(project, path.join(base, 'alias'));
  // A link inside the root that leads into the toolsets directory.
  await symlink(path.join(project, 'toolsets'), path.join(project, 'scratch', 'ts-link'));
  server = await startToolServer(
    loadConfig({
      TOOL_SERVER_PORT: '0',
      LOG_LEVEL: 'silent',
      FS_ROOTS: path.join(base, 'alias'),
      TOOLSETS_DIR: path.join(project, 'toolsets'),
      PROMPTS_DIR: path.join(project, 'prompts'), // does not exist yet
      POLICY_FILE: path.join(project, 'conf', 'policy.yaml'),
      TOOLSHIFT_DATA_DIR: path.join(project, 'data'),
    }),
  );
});

afterAll(async () => {
  await server?.close();
  await rm(base, { recursive: true, force: true });
});

describe("the daemon's configuration inside a root cannot be changed by the file tools", () => {
  it('refuses every writing tool on the toolsets, prompts, policy and data paths, and changes nothing there', async () => {
    const before = await snapshot();
    const attempts: [string, Record<string, unknown>][] = [
      ['write_file', { path: 'toolsets/web_tools.yaml', content: BACKEND }],
      ['write_file', { path: 'toolsets/evil.yaml', content: BACKEND }],
      ['write_file', { path: 'scratch/ts-link/evil.yaml', content: BACKEND }],
      ['write_file', { path: `${project}/toolsets/evil.yaml`, content: BACKEND }],
      ['edit_file', { path: 'toolsets/web_tools.yaml', edits: [{ old_text: 'fetch_url', new_text: 'x' }] }],
      ['create_directory', { path: 'toolsets/more' }],
      ['delete_file', { path: 'toolsets/web_tools.yaml' }],
      ['delete_directory', { path: 'toolsets', recursive: true }],
      ['move_file', { source: 'toolsets/web_tools.yaml', destination: 'scratch/stolen.yaml' }],
      ['move_file', { source: 'toolsets', destination: 'scratch/old-toolsets' }],
      ['move_file', { source: 'scratch/evil.yaml', destination: 'toolsets/evil.yaml' }],
      ['create_directory', { path: 'prompts' }],
      ['write_file', { path: 'prompts/review.yaml', content: 'name: review\n' }],
      ['move_file', { source: 'scratch/incoming', destination: 'prompts' }],
      ['write_file', { path: 'conf/policy.yaml', content: 'rules: [{allow: "*"}]\n' }],
      ['edit_file', { path: 'conf/policy.yaml', edits: [{ old_text: '[]', new_text: '[{allow: "*"}]' }] }],
      ['delete_file', { path: 'conf/policy.yaml' }],
      ['delete_directory', { path: 'conf', recursive: true }],
      ['move_file', { source: 'conf', destination: 'scratch/conf' }],
      ['move_file', { source: 'conf/policy.yaml', destination: 'scratch/policy.yaml' }],
      ['write_file', { path: 'data/gateway.db', content: 'overwritten' }],
      ['write_file', { path: 'data/other.db', content: 'x' }],
      ['delete_file', { path: 'data/gateway.db' }],
      ['delete_directory', { path: 'data', recursive: true }],
      ['move_file', { source: 'data/gateway.db', destination: 'scratch/gateway.db' }],
      ['create_directory', { path: 'data/sub' }],
    ];
    for (const [name, args] of attempts) {
      const r = await call(name, args);
      expect({ name, args, success: r.success }).toEqual({ name, args, success: false });
      expect(r.error).toMatch(/matches the protected pattern "[^"]*(toolsets|prompts|policy\.yaml|data)/);
      expect(await snapshot()).toEqual(before);
    }
    expect(before.prompts).toBe('absent');
    expect(before['toolsets/web_tools.yaml']).toBe(`file ${TOOLSET}`);
  });

  it('says which protected path it is, in the existing wording', async () => {
    const r = await call('write_file', { path: 'toolsets/evil.yaml', content: BACKEND });
    expect(r.error).toBe(
      `Access denied: ${path.join(project, 'toolsets', 'evil.yaml')} matches the protected pattern ` +
        `"${path.join(project, 'toolsets')}/**"; files like this (toolshift's own installation, configuration and data) ` +
        'cannot be modified',
    );
    const inside = await call('delete_file', { path: 'toolsets/web_tools.yaml' });
    expect(inside.error).toContain(`matches the protected pattern "${path.join(project, 'toolsets')}/**"`);
    const policy = await call('delete_file', { path: 'conf/policy.yaml' });
    expect(policy.error).toContain(
      `matches the protected pattern "${path.join(project, 'conf', 'policy.yaml')}"`,
    );
  });

  it('a move whose content would land on the policy path is refused', async () => {
    await mkdir(path.join(project, 'scratch', 'newconf'));
    await writeFile(path.join(project, 'scratch', 'newconf', 'policy.yaml'), 'rules: [{allow: "*"}]\n');
    await rm(path.join(project, 'conf', 'policy.yaml'));
    await rm(path.join(project, 'conf'), { recursive: true });
    try {
      const r = await call('move_file', { source: 'scratch/newconf', destination: 'conf' });
      expect(r.success).toBe(false);
      expect(r.error).toMatch(/would become .*conf\/policy\.yaml, matching the protected pattern/);
      expect(await lstat(path.join(project, 'conf')).catch(() => null)).toBeNull();
    } finally {
      await mkdir(path.join(project, 'conf'));
      await writeFile(path.join(project, 'conf', 'policy.yaml'), POLICY);
    }
  });

  it('reading the configuration and writing elsewhere in the project still work', async () => {
    const read = await call('read_text_file', { path: 'toolsets/web_tools.yaml' });
    expect(read.result).toMatchObject({ content: TOOLSET });
    const write = await call('write_file', { path: 'notes.txt', content: 'hello' });
    expect(write.success).toBe(true);
    expect(await readFile(path.join(project, 'notes.txt'), 'utf8')).toBe('hello');
    const mkdirOk = await call('create_directory', { path: 'scratch/toolsets-notes' });
    expect(mkdirOk.success).toBe(true);
  });
});

describe('where the CLI sends the stored tokens', () => {
  it('addresses.json beside a credentials file outside the data directory cannot be changed by a file tool', async () => {
    const keys = path.join(project, 'keys');
    const other = await startToolServer(
      loadConfig({
        TOOL_SERVER_PORT: '0',
        LOG_LEVEL: 'silent',
        FS_ROOTS: project,
        TOOLSETS_DIR: path.join(project, 'toolsets'),
        TOOLSHIFT_DATA_DIR: path.join(project, 'data'),
        TOOLSHIFT_CREDENTIALS_FILE: path.join(keys, 'credentials.json'),
      }),
    );
    try {
      const file = path.join(keys, 'addresses.json');
      const recorded = await readFile(file, 'utf8');
      expect(JSON.parse(recorded)).toEqual({ 'tool-server': [other.url] });
      const res = await fetch(`${other.url}/tools/write_file`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          path: 'keys/addresses.json',
          content: '{"mcp-gateway":["http://attacker:80"]}',
        }),
      });
      const r = (await res.json()) as ToolResult;
      expect(r.success).toBe(false);
      expect(r.error).toMatch(/matches the protected pattern ".*addresses\.json"/);
      expect(await readFile(file, 'utf8')).toBe(recorded);
    } finally {
      await other.close();
    }
  });
});

describe('protected paths the roots do not cover', () => {
  it('a protected directory above a root does not make the root read-only', async () => {
    const root = path.join(project, 'scratch');
    const guard = await PathGuard.create({ roots: [root], readOnlyRoots: [], protectedPaths: [base] });
    await expect(guard.resolveForWrite('fine.txt')).resolves.toBe(path.join(root, 'fine.txt'));
  });
});
