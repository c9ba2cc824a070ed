import { readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive, waitFor } from '../../helpers/processes.ts';
import { makeStack, retain, type Stack } from '../../helpers/stack.ts';

// POST /mcp/admin/reload: re-reads the toolset files, starts nothing (a new server starts on first use, as
// at start), drops what is gone (from every session too, its server stopped), skips a toolset whose names
// collide with a warning, and refuses an invalid shipped directory with file-and-line errors, changing nothing.

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const shipped = (name: string) => readFileSync(path.resolve('toolsets', name), 'utf8');
const EVERYTHING = `id: everything
description: The MCP reference test server.
backend:
  mcp:
    command: mcp-server-everything
    args: [stdio]
`;
const ADMIN = { authorization: 'Bearer admin-token' };

describe('reload', () => {
  it('adds, changes and removes toolsets without a restart; an invalid directory changes nothing, a collision skips one toolset', async () => {
    stack = await makeStack({
      toolsets: { 'memory.yaml': shipped('memory.yaml') },
      tokens: { admin: 'admin-token', agent: 'agent-token' },
    });
    const s = stack;
    const reload = () => s.post(s.gatewayApp, '/mcp/admin/reload', {}, ADMIN);
    const ids = async () =>
      (await s.get(s.gatewayApp, '/mcp/admin/toolsets', ADMIN)).body.toolsets.map(
        (t: { id: string }) => t.id,
      );
    await s.post(
      s.gatewayApp,
      '/mcp/admin/toolsets',
      { action: 'ACTIVATE', toolset_ids: ['memory'], session_id: 's' },
      ADMIN,
    );
    const memoryPid = s.gateway.upstreams()['mcp-server-memory'].pid as number;

    const byAgent = await s.post(
      s.gatewayApp,
      '/mcp/admin/reload',
      {},
      { authorization: 'Bearer agent-token' },
    );
    expect(byAgent.status).toBe(403);

    // New files: loaded, their servers not started until used; the running server is kept.
    await writeFile(path.join(s.toolsetsDir, 'everything.yaml'), EVERYTHING);
    await writeFile(path.join(s.toolsetsDir, 'thinking.yaml'), shipped('sequential_thinking.yaml'));
    expect((await reload()).body).toEqual({
      added: ['everything', 'sequential_thinking'],
      removed: [],
      changed: [],
      unchanged: ['memory'],
      warnings: [],
      policy: expect.stringMatching(/policy\.yaml: no file: everything allowed$/),
    });
    expect(s.gateway.upstreams()['mcp-server-everything stdio'].state).toBe('idle');
    expect(s.gateway.upstreams()['mcp-server-sequential-thinking'].state).toBe('idle');
    expect(s.gateway.upstreams()['mcp-server-memory'].pid).toBe(memoryPid);

    // Invalid directories: refused with the file and line, and the running catalog stays as it was.
    await writeFile(path.join(s.toolsetsDir, 'broken.yaml'), 'id: broken\nid: twice\ndescription: x\n');
    const badYaml = await reload();
    expect(badYaml.status).toBe(400);
    expect(badYaml.body.error).toMatch(
      /^Reload refused, the running catalog is unchanged: .*broken\.yaml:2: not valid YAML: Map keys must be unique/,
    );
    await writeFile(
      path.join(s.toolsetsDir, 'broken.yaml'),
      `id: broken\ndescription: x\nvariables: [NOT_SET_ANYWHERE]\nbackend:\n  mcp:\n    url: \${NOT_SET_ANYWHERE}\n`,
    );
    expect((await reload()).body.error).toMatch(/broken\.yaml:6: variable NOT_SET_ANYWHERE is not set/);
    await writeFile(
      path.join(s.toolsetsDir, 'broken.yaml'),
      shipped('memory.yaml').replace('id: memory', 'id: twin'),
    );
    // A collision (the running memory server's listing is known) skips that toolset only.
    const clash = await reload();
    expect(clash.status).toBe(200);
    expect(clash.body).toMatchObject({
      added: ['twin'],
      unchanged: ['everything', 'memory', 'sequential_thinking'],
    });
    expect(clash.body.warnings).toEqual([
      expect.stringMatching(
        /^toolset twin is skipped \(it offers no tools\): .*broken\.yaml: mcp-server-memory offers tool names another toolset already offers: create_entities, create_relations, .* \(toolset memory, .*memory\.yaml\); add prefix: twin_ to .*broken\.yaml/,
      ),
    ]);
    // broken.yaml sorts first, yet memory keeps its names: a toolset that offers tools keeps them.
    expect(await ids()).toEqual(['twin', 'everything', 'memory', 'sequential_thinking']);
    expect(Object.keys(s.gateway.upstreams()).sort()).toEqual([
      'mcp-server-everything stdio',
      'mcp-server-memory',
      'mcp-server-sequential-thinking',
    ]);
    expect(s.gateway.upstreams()['mcp-server-memory']).toMatchObject({
      pid: memoryPid,
      toolsets: ['twin', 'memory'],
    });
    await rm(path.join(s.toolsetsDir, 'broken.yaml'));

    // A changed file, and a removed one: gone from the catalog, from the session, and its server stopped.
    await writeFile(
      path.join(s.toolsetsDir, 'thinking.yaml'),
      shipped('sequential_thinking.yaml').replace('Think a hard problem', 'Reason about a hard problem'),
    );
    await rm(path.join(s.toolsetsDir, 'memory.yaml'));
    expect((await reload()).body).toMatchObject({
      added: [],
      removed: ['twin', 'memory'],
      changed: ['sequential_thinking'],
      unchanged: ['everything'],
    });
    expect(await ids()).toEqual(['everything', 'sequential_thinking']);
    expect((await s.get(s.gatewayApp, '/mcp/tools?session_id=s', ADMIN)).body.tools).toEqual([]);
    await waitFor(() => !isAlive(memoryPid), 'the removed toolset’s server to stop');
    const gone = await s.post(
      s.gatewayApp,
      '/mcp/tools/read_graph/call',
      { session_id: 's', arguments: {} },
      ADMIN,
    );
    expect(gone.status).toBe(404);

    await s.flushWrites();

    const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
    const query = db.prepare("SELECT ok FROM audit WHERE kind = 'reload' ORDER BY id");
    const audited = query.all();
    retain(db, query);
    db.close();
    expect(audited).toEqual([{ ok: 1 }, { ok: 0 }, { ok: 0 }, { ok: 1 }, { ok: 1 }]);
  });

  it('loads a new server without starting it; one that cannot start says so on first use and shows down', async () => {
    stack = await makeStack({ toolsets: { 'memory.yaml': shipped('memory.yaml') } });
    await writeFile(
      path.join(stack.toolsetsDir, 'missing.yaml'),
      'id: missing\ndescription: A server that is not installed.\nbackend:\n  mcp:\n    command: /nonexistent/mcp-server\n',
    );
    const res = await stack.post(stack.gatewayApp, '/mcp/admin/reload', {});
    expect(res.body.added).toEqual(['missing']);
    expect(res.body.warnings).toEqual([]);
    const idle = (await stack.get(stack.gatewayApp, '/mcp/admin/toolsets')).body.toolsets;
    expect(idle.find((t: { id: string }) => t.id === 'missing')).toMatchObject({ health: 'idle', tools: [] });
    const used = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['missing'],
      session_id: 's',
    });
    expect(used.body.error).toMatch(
      /mcp-server is not available: cannot connect: spawn \/nonexistent\/mcp-server ENOENT/,
    );
    const listed = (await stack.get(stack.gatewayApp, '/mcp/admin/toolsets')).body.toolsets;
    expect(listed.find((t: { id: string }) => t.id === 'missing')).toMatchObject({
      health: 'down',
      tools: [],
    });
  });
});
