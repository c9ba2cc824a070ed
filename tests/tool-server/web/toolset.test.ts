import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { Security } from '../../../lib/http/security.ts';
import { toolServerBackend } from '../../../mcp-gateway/backends/tool-server-backend.ts';
import { buildCatalog, loadToolsetFiles } from '../../../mcp-gateway/catalog/catalog.ts';
import { createToolServerApp } from '../../../tool-server/app.ts';
import { createRegistry } from '../../../tool-server/registry.ts';
import { webTools } from '../../../tool-server/tools/web/tools.ts';
import { type LocalServer, localServer, webContext } from '../../helpers/web-servers.ts';

// toolsets/web_tools.yaml lists exactly the web tools the tool-server serves, and the gateway accepts it
// against the real tool-server app; each tool's definition carries its schema and annotations.

const security: Security = { tokens: [], allowedHosts: [], allowedOrigins: [], listenHost: '127.0.0.1' };
let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanup.map((f) => f()));
  cleanup = [];
});

async function toolServer(web: Parameters<typeof webContext>[0] = {}) {
  return createToolServerApp({
    registry: createRegistry(webTools),
    context: await webContext(web),
    log: pino({ level: 'silent' }),
    security,
  });
}

describe('web_tools', () => {
  it('the toolset file lists exactly the tools the tool-server serves, and the gateway loads it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'web-toolset-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    await copyFile(path.resolve('toolsets/web_tools.yaml'), path.join(dir, 'web_tools.yaml'));
    const [spec] = loadToolsetFiles(dir);
    expect(spec.id).toBe('web_tools');
    const app = await toolServer();
    const served = (await (await app.request('http://127.0.0.1/tools')).json()) as Array<{ name: string }>;
    expect(served.map((d) => d.name)).toEqual(webTools.map((t) => t.name));
    const file = parseYaml(await readFile(path.resolve('toolsets/web_tools.yaml'), 'utf8')) as {
      tools: string[];
    };
    expect([...file.tools].sort()).toEqual(served.map((d) => d.name).sort());

    const backend = toolServerBackend({
      baseUrl: 'http://127.0.0.1',
      fetch: async (u, i) => app.request(u, i),
    });
    const catalog = await buildCatalog([spec], { 'tool-server': backend });
    expect(catalog.toolset('web_tools')?.tools).toEqual(['web_search', 'fetch_url']);
  });

  it('declares both tools read-only and open-world, with JSON Schemas for their arguments', async () => {
    const app = await toolServer();
    const defs = (await (await app.request('http://127.0.0.1/tools')).json()) as any[];
    for (const d of defs) {
      expect(d.annotations).toMatchObject({
        readOnlyHint: true,
        destructiveHint: false,
        openWorldHint: true,
      });
    }
    const fetchDef = defs.find((d) => d.name === 'fetch_url');
    expect(fetchDef.parameters).toMatchObject({ type: 'object', required: ['url'] });
    expect(Object.keys(fetchDef.parameters.properties)).toEqual(['url', 'max_chars', 'start_index', 'raw']);
    const searchDef = defs.find((d) => d.name === 'web_search');
    expect(searchDef.parameters.properties.count).toMatchObject({ type: 'integer', minimum: 1, maximum: 20 });
  });

  it('serves fetch_url over HTTP: a refusal is a tool failure, an allowed page a result', async () => {
    const site: LocalServer = await localServer((_req, res) => res.end('served'));
    cleanup.push(() => site.close());
    const call = async (app: Awaited<ReturnType<typeof toolServer>>, body: unknown) => {
      const res = await app.request('http://127.0.0.1/tools/fetch_url', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const closed = await call(await toolServer(), { url: `${site.origin}/` });
    expect(closed).toMatchObject({
      status: 200,
      body: { success: false, error: expect.stringMatching(/loopback/) },
    });
    const open = await call(await toolServer({ allow: [`127.0.0.1:${site.port}`] }), {
      url: `${site.origin}/`,
    });
    expect(open).toMatchObject({
      status: 200,
      body: { success: true, result: { text: 'served', status: 200 } },
    });
    expect(site.hits).toEqual(['GET /']);
    const bad = await call(await toolServer(), { url: 42 });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/url/);
  });
});
