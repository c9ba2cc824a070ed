import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createTokenCounter } from '../../../lib/telemetry/tokens.ts';
import { toolServerBackend } from '../../../mcp-gateway/backends/tool-server-backend.ts';
import { buildCatalog, loadToolsetFiles } from '../../../mcp-gateway/catalog/catalog.ts';
import { createToolServerApp } from '../../../tool-server/app.ts';
import { PathGuard } from '../../../tool-server/guards/paths/guard.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import { nativeTools } from '../../../tool-server/tools/native.ts';
import {
  fetchOf,
  log,
  makeStack,
  openSecurity,
  retain,
  SPLIT_TOOLSETS,
  type Stack,
} from '../../helpers/stack.ts';

/** A tool as the gateway lists it, in the fields a model's tool list sends. */
type ShownTool = { name: string; description: string; parameters: Record<string, unknown> };

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

async function toolsetDir(files: Record<string, string>) {
  const dir = await mkdtemp(path.join(tmpdir(), 'toolsets-'));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  return dir;
}

async function backends() {
  const root = await mkdtemp(path.join(tmpdir(), 'ws-'));
  const app = createToolServerApp({
    registry: createRegistry(nativeTools),
    context: { paths: await PathGuard.create({ roots: [root], readOnlyRoots: [] }), maxReadBytes: 1024 },
    log,
    security: openSecurity,
  });
  return { 'tool-server': toolServerBackend({ baseUrl: 'http://t', fetch: fetchOf(app) }) };
}

describe('toolset catalog', () => {
  it('refuses to start when a toolset lists a tool its backend does not serve, naming file and tool', async () => {
    const dir = await toolsetDir({
      'broken.yaml': 'id: broken\ndescription: x\ntools: [read_text_file, read_fil]\n',
    });
    await expect(buildCatalog(loadToolsetFiles(dir), await backends())).rejects.toThrow(
      /broken\.yaml: tool read_fil is not served by backend tool-server; it serves: .*read_text_file/,
    );
  });

  it('reports bad ids, bad YAML, unknown backends and duplicate tools with the file name (a duplicate skips one toolset)', async () => {
    const badId = await toolsetDir({ 'a.yaml': 'id: Bad-Id\ndescription: x\ntools: [write_file]\n' });
    expect(() => loadToolsetFiles(badId)).toThrow(/a\.yaml:1: id: must match/);
    const badYaml = await toolsetDir({ 'b.yaml': 'id: [unclosed\n' });
    expect(() => loadToolsetFiles(badYaml)).toThrow(/b\.yaml:2: not valid YAML/);
    const dup = await toolsetDir({
      'a.yaml': 'id: one\ndescription: x\ntools: [write_file]\n',
      'b.yaml': 'id: two\ndescription: y\ntools: [write_file]\n',
    });
    // Two toolsets listing the same tool: the later one is skipped, saying why, and the first loads.
    const loaded = await buildCatalog(loadToolsetFiles(dup), await backends());
    expect(loaded.toolset('one')?.tools).toEqual(['write_file']);
    expect(loaded.toolset('two')?.tools).toEqual([]);
    expect(loaded.status('two')?.health_reason).toMatch(
      /b\.yaml: tool-server offers a tool name another toolset already offers: write_file \(toolset one, .*a\.yaml\); remove it from the tools of .*b\.yaml or of the other toolset/,
    );
    const reserved = await toolsetDir({ 'r.yaml': 'id: r\ndescription: x\ntools: [manage_toolsets]\n' });
    expect(() => loadToolsetFiles(reserved)).toThrow(/r\.yaml: manage_toolsets is the agent's own meta-tool/);
    const backendless = await toolsetDir({
      'c.yaml': 'id: c\ndescription: x\nbackend: nowhere\ntools: [write_file]\n',
    });
    await expect(buildCatalog(loadToolsetFiles(backendless), await backends())).rejects.toThrow(
      /c\.yaml: backend nowhere is not configured; valid backends: tool-server/,
    );
  });

  it('loads the shipped toolsets against the real tool-server', async () => {
    const catalog = await buildCatalog(loadToolsetFiles(path.resolve('toolsets')), await backends());
    expect(catalog.toolsets.map((t) => t.id)).toContain('file_system_tools');
    expect(catalog.tools.get('edit_file')?.toolset).toBe('file_system_tools');
  });
});

describe('admin API', () => {
  it('keeps the seed contract: {action, toolset_ids} without session_id acts on the default session', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const res = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      session_id: 'default',
      active_toolsets: ['fs_read'],
      tools: ['read_text_file', 'list_directory', 'search_files'],
      added_tools: ['read_text_file', 'list_directory', 'search_files'],
      removed_tools: [],
    });
    const list = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets');
    expect(list.body.toolsets.find((t: { id: string }) => t.id === 'fs_read').active).toBe(true);
  });

  it.each([
    [
      { action: 'EXPLODE', toolset_ids: ['fs_read'] },
      /action: Invalid option: expected one of "ACTIVATE"\|"DEACTIVATE"/,
    ],
    [
      { action: 'ACTIVATE', toolset_ids: 'fs_read' },
      /toolset_ids: Invalid input: expected array, received string/,
    ],
    [{ action: 'ACTIVATE', toolset_ids: [] }, /toolset_ids: give at least one toolset id/],
    [{ action: 'ACTIVATE', toolset_ids: [1] }, /toolset_ids\.0: Invalid input: expected string/],
    [{ toolset_ids: ['fs_read'] }, /action: Invalid option/],
    [{ action: 'ACTIVATE', toolset_ids: ['fs_read'], session_id: 'bad id!' }, /session_id: must be 1-128/],
    ['{"action": "ACTIVATE",', /Request body is not valid JSON/],
    [
      { action: 'ACTIVATE', toolset_ids: ['nope', 'fs_read'] },
      /Unknown toolset id\(s\): nope\. Valid ids: fs_read, fs_write/,
    ],
  ])('answers 400 with a useful message for %j', async (body, message) => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const res = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', body);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(message);
  });

  it('lets the operator disable a toolset: removed from sessions, 403 on activation, back on enable', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'a',
    });
    const disabled = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'DISABLE',
      toolset_ids: ['fs_read'],
    });
    expect(disabled.status).toBe(200);
    expect((await s.get(s.gatewayApp, '/mcp/tools?session_id=a')).body.tools).toEqual([]);
    const refused = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'a',
    });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatch(/disabled by the operator: fs_read/);
    const listed = await s.get(s.gatewayApp, '/mcp/admin/toolsets?session_id=a');
    expect(listed.body.toolsets.find((t: { id: string }) => t.id === 'fs_read')).toMatchObject({
      enabled: false,
    });
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', { action: 'ENABLE', toolset_ids: ['fs_read'] });
    const again = await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'a',
    });
    expect(again.status).toBe(200);
  });

  it('requires the bearer token on admin routes when one is configured', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: { admin: 's3cret' } });
    const body = { action: 'ACTIVATE', toolset_ids: ['fs_read'] };
    const denied = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', body);
    expect(denied.status).toBe(401);
    expect(denied.body.error).toMatch(/Authorization: Bearer/);
    const ok = await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', body, {
      authorization: 'Bearer s3cret',
    });
    expect(ok.status).toBe(200);
  });

  it("shows a toolset's tool definitions to an approver without activating anything; an unknown id is a 404", async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, tokens: { admin: 'adm', user: 'usr' } });
    const viewer = { authorization: 'Bearer usr' };
    const res = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets/fs_read/tools', viewer);
    expect(res.status).toBe(200);
    expect(res.body.toolset).toBe('fs_read');
    expect(res.body.tools.map((t: { name: string }) => t.name)).toEqual([
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    expect(res.body.tools[0]).toMatchObject({
      toolset: 'fs_read',
      description: expect.stringMatching(/\w/),
      parameters: expect.objectContaining({
        type: 'object',
        properties: expect.objectContaining({ path: expect.anything() }),
      }),
    });
    // Nothing was activated by looking.
    const listed = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets', viewer);
    expect(listed.body.toolsets.filter((t: { active: boolean }) => t.active)).toEqual([]);
    const unknown = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets/nope/tools', viewer);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toContain('Unknown toolset nope');
    expect((await stack.get(stack.gatewayApp, '/mcp/admin/toolsets/fs_read/tools')).status).toBe(401);
  });

  it('filters the catalog by words in ids, descriptions and tool names', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const byTool = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets?query=edit');
    expect(byTool.body.toolsets.map((t: { id: string }) => t.id)).toEqual(['fs_write']);
    const byDescription = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets?query=directories');
    // fs_read's description names directories; fs_write's tools only take a path inside them.
    expect(byDescription.body.toolsets[0].id).toBe('fs_read');
    const none = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets?query=kubernetes');
    expect(none.body.toolsets).toEqual([]);
  });
});

describe('tool listing and calls', () => {
  it('lists tools in activation order and keeps sessions apart', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      session_id: 'a',
    });
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'a',
    });
    const a = await s.get(s.gatewayApp, '/mcp/tools?session_id=a');
    expect(a.body.tools.map((t: { name: string }) => t.name)).toEqual([
      'write_file',
      'edit_file',
      'delete_file',
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    expect(a.body.tools[0]).toMatchObject({ toolset: 'fs_write', annotations: { destructiveHint: true } });
    expect((await s.get(s.gatewayApp, '/mcp/tools?session_id=b')).body.tools).toEqual([]);
  });

  it('carries each native tool’s output schema as the tool-server lists it, outside what its tokens count', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    const s = stack;
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_read'],
      session_id: 'o',
    });
    const served = new Map(
      createRegistry(nativeTools)
        .definitions()
        .map((d) => [d.name, d.outputSchema]),
    );
    const { tools } = (await s.get(s.gatewayApp, '/mcp/tools?session_id=o')).body;
    expect(tools.length).toBeGreaterThan(0);
    for (const t of tools) expect(t.output_schema, t.name).toEqual(served.get(t.name));
    expect(tools[0]).toMatchObject({
      name: 'read_text_file',
      output_schema: { type: 'object', properties: { content: { type: ['string', 'null'] } } },
    });
    // Tool-definition tokens count what a model's tool list sends (name, description, parameters) only.
    const counter = createTokenCounter();
    const listed = await s.get(s.gatewayApp, '/mcp/admin/toolsets?session_id=o');
    const fsRead = listed.body.toolsets.find((t: { id: string }) => t.id === 'fs_read');
    const sent = tools.map((t: ShownTool) => ({
      name: t.name,
      description: t.description,
      parameters: t.parameters,
    }));
    expect(fsRead.definition_tokens).toBe(counter.tools(sent));
  });

  it('refuses a tool whose toolset is not active, an unknown tool, and bad arguments, then runs a good call', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, autoActivate: false });
    const s = stack;
    const callUrl = (name: string) => `/mcp/tools/${name}/call`;
    const inactive = await s.post(s.gatewayApp, callUrl('write_file'), {
      session_id: 's',
      arguments: { path: 'a.txt', content: 'x' },
    });
    expect(inactive.status).toBe(403);
    expect(inactive.body.error).toBe(
      'Tool write_file belongs to toolset fs_write, which is not active in this session; activate fs_write first',
    );
    const unknown = await s.post(s.gatewayApp, callUrl('format_disk'), { session_id: 's', arguments: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatch(/Unknown tool format_disk\. Tools active in this session: none/);

    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      session_id: 's',
    });
    const bad = await s.post(s.gatewayApp, callUrl('write_file'), {
      session_id: 's',
      arguments: { path: 3 },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/Invalid arguments for write_file: .*missing required property 'content'/);
    expect(bad.body.error).toMatch(/path must be string/);
    expect(bad.body.error).toMatch(/Expected: \{path: string, content: string\}/);

    const ok = await s.post(s.gatewayApp, callUrl('write_file'), {
      session_id: 's',
      arguments: { path: 'a.txt', content: 'hello' },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.success).toBe(true);
  });

  it('starts new sessions with the default toolsets, without storing a session that is only read', async () => {
    stack = await makeStack({
      toolsets: {
        ...SPLIT_TOOLSETS,
        'fs_read.yaml': SPLIT_TOOLSETS['fs_read.yaml'].replace('default: false', 'default: true'),
      },
    });
    const s = stack;
    const fresh = await s.get(s.gatewayApp, '/mcp/tools?session_id=new');
    expect(fresh.body.tools.map((t: { name: string }) => t.name)).toEqual([
      'read_text_file',
      'list_directory',
      'search_files',
    ]);
    await s.post(s.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write'],
      session_id: 'new',
    });
    const both = await s.get(s.gatewayApp, '/mcp/admin/toolsets?session_id=new');
    expect(
      both.body.toolsets.filter((t: { active: boolean }) => t.active).map((t: { id: string }) => t.id),
    ).toEqual(['fs_read', 'fs_write']);
    await s.flushWrites();
    const db = new Database(path.join(s.dataDir, 'gateway.db'), { readonly: true });
    const query = db.prepare('SELECT id FROM sessions');
    const sessions = query.all();
    retain(db, query);
    db.close();
    expect(sessions).toEqual([{ id: 'new' }]);
  });

  it('keeps sessions and their active toolsets across a restart', async () => {
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS });
    await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'ACTIVATE',
      toolset_ids: ['fs_write', 'fs_read'],
      session_id: 'keep',
    });
    await stack.post(stack.gatewayApp, '/mcp/admin/toolsets', {
      action: 'DISABLE',
      toolset_ids: ['fs_read'],
    });
    const dataDir = stack.dataDir;
    await stack.close(true);
    stack = await makeStack({ toolsets: SPLIT_TOOLSETS, dataDir });
    const listed = await stack.get(stack.gatewayApp, '/mcp/admin/toolsets?session_id=keep');
    expect(listed.body.toolsets).toEqual([
      expect.objectContaining({ id: 'fs_read', active: false, enabled: false }),
      expect.objectContaining({ id: 'fs_write', active: true, enabled: true }),
    ]);
  });
});
