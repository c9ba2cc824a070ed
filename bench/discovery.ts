import { discoveryCatalog, loadNeeds, measureRecall, type Need } from '../tests/helpers/discovery.ts';
import { postJson } from './arms.ts';

// Figure 5, discovery: recall@1 and recall@3 of the right toolset for the plain-language needs of
// tests/fixtures/discovery/needs.json, asked as a model asks — manage_toolsets LIST with a query, through the
// gateway's HTTP route — over the whole benchmark catalog. A second figure repeats it in process on a catalog
// of over 200 tools (the GitHub toolsets twice: github.com and an Enterprise copy).

/** Recall of one catalog. */
export interface Recall {
  toolsets: number;
  tools: number;
  needs: number;
  recallAt1: number;
  recallAt3: number;
  msPerQuery: number;
  misses: { need: string; want: string; got: string[] }[];
}

/** LIST with each need's words over the running gateway; `toolsets`/`tools` describe its catalog. */
export async function recallOverHttp(gatewayUrl: string, catalogSize: { toolsets: number; tools: number }) {
  const needs: Need[] = loadNeeds();
  const misses: Recall['misses'] = [];
  let at1 = 0;
  let at3 = 0;
  const started = performance.now();
  for (const { need, toolset } of needs) {
    const { result } = await postJson(`${gatewayUrl}/mcp/manage_toolsets`, {
      session_id: 'bench-discovery',
      arguments: { action: 'LIST', toolset_ids: [], query: need },
    });
    const got = (result.toolsets as { id: string }[]).slice(0, 3).map((t) => t.id);
    if (got[0] === toolset) at1++;
    if (got.includes(toolset)) at3++;
    else misses.push({ need, want: toolset, got });
  }
  return {
    ...catalogSize,
    needs: needs.length,
    recallAt1: at1 / needs.length,
    recallAt3: at3 / needs.length,
    msPerQuery: (performance.now() - started) / needs.length,
    misses,
  } satisfies Recall;
}

/** The same needs on a catalog of over 200 tools, in process (the gateway's ranked LIST). */
export async function recallAtScale(): Promise<Recall> {
  const needs = loadNeeds();
  const catalog = await discoveryCatalog({ enterprise: true });
  try {
    const same = (got: string, want: string) => got === want || got === want.replace(/^github_/, 'ghe_');
    catalog.gateway.listToolsets('discovery', 'warm up the index');
    const started = performance.now();
    const recall = measureRecall(catalog.gateway, needs, same);
    return {
      toolsets: catalog.toolsets,
      tools: catalog.tools,
      needs: needs.length,
      recallAt1: recall.recallAt1,
      recallAt3: recall.recallAt3,
      msPerQuery: (performance.now() - started) / needs.length,
      misses: recall.misses,
    };
  } finally {
    await catalog.close();
  }
}
