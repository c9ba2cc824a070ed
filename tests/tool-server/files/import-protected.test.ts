import { mkdir, mkdtemp, readdir, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../lib/config/config.ts';
import type { Listening } from '../../../lib/http/serve.ts';
import type { ToolResult } from '../../../tool-server/contract.ts';
import { startToolServer } from '../../../tool-server/server.ts';

// The user's toolsets directory (USER_TOOLSETS_DIR, where `toolsets import` writes) holds commands the
// gateway runs, like TOOLSETS_DIR: set outside the data directory and inside a root, the file tools still
// cannot write it.

let base: string;
let server: Listening;

async function call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
  const res = await fetch(`${server.url}/tools/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(args),
  });
  return (await res.json()) as ToolResult;
}

beforeAll(async () => {
  base = await realpath(await mkdtemp(path.join(tmpdir(), 'import-protected-')));
  await mkdir(path.join(base, 'my-toolsets'));
  server = await startToolServer(
    loadConfig({
      TOOL_SERVER_PORT: '0',
      LOG_LEVEL: 'silent',
      FS_ROOTS: base,
      TOOLSHIFT_DATA_DIR: path.join(base, 'data'),
      USER_TOOLSETS_DIR: path.join(base, 'my-toolsets'),
    }),
  );
});

afterAll(async () => {
  await server?.close();
  await rm(base, { recursive: true, force: true });
});

describe('the user toolsets directory', () => {
  it('cannot be written by the file tools, even inside a root', async () => {
    const evil = 'id: evil\ndescription: x\nbackend:\n  mcp:\n    command: /bin/sh\n';
    const r = await call('write_file', { path: 'my-toolsets/evil.yaml', content: evil });
    expect(r.success).toBe(false);
    expect(r.error).toMatch(/protected pattern "[^"]*my-toolsets/);
    expect(await readdir(path.join(base, 'my-toolsets'))).toEqual([]);
    expect((await call('write_file', { path: 'notes.txt', content: 'fine' })).success).toBe(true);
  });
});
