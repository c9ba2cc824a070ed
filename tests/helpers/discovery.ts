import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Tool } from '@modelcontextprotocol/server';
import type { Gateway } from '../../mcp-gateway/core/gateway.ts';
import { startMcpHttpServer } from './mcp-http-server.ts';
import { makeStack } from './stack.ts';

// The discovery catalog: the repository's own toolsets (native tools, memory, sequential thinking) plus the
// GitHub MCP server's 117 recorded tool definitions split into toolsets (tests/fixtures/discovery/github),
// served by an SDK v2 server on loopback. Used by tests/mcp-gateway/catalog/discovery.test.ts and `npm run bench`.

const FIXTURES = path.resolve('tests/fixtures/discovery');

/** One plain-language need and the toolset that serves it. */
export interface Need {
  need: string;
  toolset: string;
  /**
   * `tune`: the ranking's weights and the toolsets' keywords may be chosen on it; `held_out`: measured only;
   * `fresh`: measured only, written in everyday words (the estimate of needs written by people).
   */
  split: 'tune' | 'held_out' | 'fresh';
}

/** The discovery test set (tests/fixtures/discovery/needs.json). */
export function loadNeeds(): Need[] {
  return (JSON.parse(readFileSync(path.join(FIXTURES, 'needs.json'), 'utf8')) as { needs: Need[] }).needs;
}

const filesIn = (dir: string) =>
  Object.fromEntries(
    readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => [f, readFileSync(path.join(dir, f), 'utf8')] as const),
  );

/**
 * Builds and connects the catalog. `enterprise` adds a second copy of the GitHub toolsets (ids and tool
 * names prefixed ghe_, "GitHub Enterprise" descriptions) for a catalog of over 200 tools; `keywords: false`
 * drops the files' keywords (a catalog as `toolsets import` writes it).
 */
export async function discoveryCatalog(opts: { enterprise?: boolean; keywords?: false } = {}) {
  const recorded = JSON.parse(
    readFileSync(path.resolve('tests/fixtures/recorded/github-mcp-server-tools.json'), 'utf8'),
  ) as { tools: Tool[] };
  const server = await startMcpHttpServer({
    name: 'github-recorded',
    tools: recorded.tools.map((definition) => ({ definition })),
  });
  const github = filesIn(path.join(FIXTURES, 'github'));
  const files: Record<string, string> = { ...filesIn(path.resolve('toolsets')), ...github };
  if (opts.enterprise) {
    for (const [name, text] of Object.entries(github)) {
      files[name.replace(/^github_/, 'ghe_')] = text
        .replace(/^id: github_/m, 'id: ghe_')
        .replace(/^prefix: github_/m, 'prefix: ghe_')
        .replace(/^description: "/m, 'description: "On the company GitHub Enterprise Server: ')
        .replace(/GITHUB_FIXTURE_URL/g, 'GHE_FIXTURE_URL');
    }
  }
  if (opts.keywords === false) {
    for (const name of Object.keys(files)) files[name] = files[name].replace(/^keywords:.*\n/m, '');
  }
  const stack = await makeStack({
    toolsets: files,
    vars: { GITHUB_FIXTURE_URL: server.url, GHE_FIXTURE_URL: `${server.url}?enterprise=1` },
  });
  const upstream = stack.catalog.toolsets.filter((t) => typeof t.backend !== 'string').map((t) => t.id);
  await stack.catalog.prepare(upstream);
  return {
    gateway: stack.gateway,
    catalog: stack.catalog,
    /** The gateway's store (its audit rows, what discovery learned from them). */
    store: stack.gatewayStore,
    toolsets: stack.catalog.toolsets.length,
    tools: stack.catalog.tools.size,
    async close() {
      await stack.close();
      await server.close();
    },
  };
}

/** Recall@1 and recall@3 of the right toolset over the needs, through the gateway's ranked LIST. */
export async function measureRecall(
  gateway: Gateway,
  needs: readonly Need[],
  matches: (got: string, want: string) => boolean = (got, want) => got === want,
) {
  const misses: { need: string; want: string; got: string[] }[] = [];
  let at1 = 0;
  let at3 = 0;
  for (const { need, toolset } of needs) {
    const got = (await gateway.listToolsets('discovery', need)).toolsets.slice(0, 3).map((t) => t.id);
    if (got[0] !== undefined && matches(got[0], toolset)) at1++;
    if (got.some((id) => matches(id, toolset))) at3++;
    else misses.push({ need, want: toolset, got });
  }
  return { needs: needs.length, recallAt1: at1 / needs.length, recallAt3: at3 / needs.length, misses };
}
